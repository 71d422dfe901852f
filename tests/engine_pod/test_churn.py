"""Lease accounting under churn: random arrivals, hang-ups, lost receivers, expiries, busy refusals.

A real engine (tiny model, 3 slots, 12-frame sessions) is stepped through a random script. After
every tick: leases are exactly the running sessions, compact (slots 0..n-1), never double-booked;
every session's outputs follow the contract (Started once and first, contiguous frames, at most
one Closed, last). At the end everyone hangs up and every slot comes back.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liveplex.live import contract
from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(600)

SLOTS = 3
VOICES = ("NATF2", "NATM1")

_op = st.one_of(
    st.tuples(st.just("arrive"), st.sampled_from(VOICES)),
    st.tuples(st.just("hangup"), st.integers(0, 50)),
    st.tuples(st.just("lose"), st.integers(0, 50)),
    st.tuples(st.just("tick"), st.integers(1, 4)),
)


@pytest.fixture(scope="module")
def churn_model(tiny_dir):
    return harness.load(tiny_dir, context=48)


def _check_outputs(call: harness.Call) -> None:
    outs = call.outputs
    if not outs:
        return
    closed = [i for i, o in enumerate(outs) if isinstance(o, contract.Closed)]
    assert len(closed) <= 1 and (not closed or closed[0] == len(outs) - 1)
    if isinstance(outs[0], contract.Closed):  # refused before it ran
        assert len(outs) == 1 and outs[0].reason in (contract.CloseReason.BUSY, contract.CloseReason.ABORTED)
        return
    assert isinstance(outs[0], contract.Started) and outs.count(contract.Started()) == 1
    audio = [o.frame for o in outs if isinstance(o, contract.Audio)]
    assert audio == list(range(len(audio)))
    if closed:
        assert outs[-1].frames == len(audio)


def _check_leases(pod: harness.Pod, live: list[harness.Call]) -> None:
    eng = pod.engine
    slots = [eng.slot_of(c.opened.id) for c in live]
    running = [s for s in slots if s is not None]
    assert sorted(running) == list(range(eng.running)), "leases must be compact and never double-booked"
    assert eng.sessions() == eng.running + eng.waiting <= SLOTS


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_op, min_size=5, max_size=30))
def test_leases_never_leak_or_double_book_under_churn(churn_model, script):
    pod = harness.Pod(*harness.build(churn_model, max_sessions=SLOTS, max_seconds=12 * 0.08))
    seed = 0
    for op, arg in script:
        live = [c for c in pod.calls if c.closed is None and not c.opened.output.ended]
        if op == "arrive":
            seed += 1
            pod.start(arg, harness.SHORT_ROLE, harness.caller_audio(seed, 20))
        elif op == "hangup" and live:
            live[arg % len(live)].opened.audio.close()
        elif op == "lose" and live:
            live[arg % len(live)].opened.output.close()
        elif op == "tick":
            for _ in range(arg):
                pod.tick()
                _check_leases(pod, [c for c in pod.calls if c.closed is None])
    for call in pod.calls:
        call.opened.audio.close()
    pod.tick()  # newcomers still queued are prefilled here, and hear the hangup next tick
    pod.tick()
    assert pod.engine.sessions() == 0 and pod.engine.running == 0
    for call in pod.calls:
        _check_outputs(call)
    assert pod.inbox.pulse.kv_positions == 0


def test_a_newcomer_lost_before_its_prefill_gives_its_slot_back_in_that_tick(churn_model):
    pod = harness.Pod(*harness.build(churn_model, max_sessions=SLOTS))
    first = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 20))
    lost = pod.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(2, 20))
    last = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(3, 20))
    lost.opened.output.close()
    pod.tick()
    assert pod.engine.running == 2 and pod.engine.slot_of(lost.opened.id) is None
    assert sorted([pod.engine.slot_of(first.opened.id), pod.engine.slot_of(last.opened.id)]) == [0, 1]
    pod.tick()
    assert len(first.pcm) == len(last.pcm) == 2 and lost.outputs == []
