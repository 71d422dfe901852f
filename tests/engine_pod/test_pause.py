"""A PersonaPlex session paused (parked: its slot's rows copied to host memory) and woken (those
rows copied back into a free slot on the same engine, `outside_frames` later, no prefill)
continues bit-exact against its twin that never paused, fed the same caller frames (issue 43,
docs/pause.md): the model's positions go on from where they were, so it perceives no gap; its
neighbour ran on meanwhile; and the time out comes off the woken line's `max_frames`. A parked
state's blob (what a move carries) still resumes exactly elsewhere, through the prefill."""

from __future__ import annotations

import pytest

from liveplex.engine_pod import engine
from liveplex.live import contract
from liveplex.live.channel import Opened
from tests.engine_pod import harness

TICKS = 20


def _pod(model, kv_dtype: str | None = None) -> harness.Pod:
    return harness.Pod(*harness.build(model, max_sessions=3, greedy=False, seed=11, buckets=(3,),
                                      prefill_budget_ms=10_000.0, jitter_frames=48, kv_dtype=kv_dtype))


@pytest.mark.parametrize("k, paused, moved, kv_dtype", [(6, 9, False, None), (6, 9, True, None), (6, 9, False, "fp8")])
def test_a_paused_and_woken_session_continues_exactly(tiny_model, k: int, paused: int, moved: bool,
                                                      kv_dtype: str | None) -> None:
    """`moved`: woken from the parked state's blob on another engine as a move would, prefilled.
    `kv_dtype` fp8: an e4m3 ring's rows are parked as their bits."""
    twin, pod = _pod(tiny_model, kv_dtype), _pod(tiny_model, kv_dtype)
    session = contract.Session("NATF2", harness.SHORT_ROLE)
    for p in (twin, pod):  # the same submission ids, so the same seeds; a neighbour in each batch
        p.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(5, TICKS + paused))
    want = twin.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    quiet = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    for _ in range(k):
        pod.tick()
    parked = pod.engine.export(quiet.opened.id, park=True)  # the pause
    assert isinstance(parked, engine.Parked)
    assert parked.nbytes >= pod.engine.pools.slot_bytes - pod.engine.pools.pcm_in[0].nbytes
    assert all(not t.is_cuda for s in parked.rows.states() for t in s.tensors())
    quiet.collect()
    assert quiet.closed == contract.Closed(contract.CloseReason.HANDED_OVER, k, 0, 0)
    pod.calls.remove(quiet)
    for _ in range(paused):  # out of the batch: the neighbour runs alone
        pod.tick()
        assert pod.engine.running == 1
    if moved:
        pod = _pod(tiny_model, kv_dtype)  # its neighbour's batch no longer matters: rows are independent
    prefills = pod.handle.pulse.prefill.cumulative()[-1]
    woken = pod.handle.resume(session, parked.blob() if moved else parked, False, paused)  # the wake
    assert isinstance(woken, Opened)
    after = harness.Call(woken, quiet.audio[quiet.fed:])
    pod.calls.append(after)
    for _ in range(TICKS):
        twin.tick()
    pod.tick()
    assert pod.engine.slot_of(woken.id) is not None and pod.engine.waiting == 0  # in the first tick's batch
    assert (pod.handle.pulse.prefill.cumulative()[-1] > prefills) == moved  # parked: no prefill ran
    for _ in range(TICKS - k - 1):
        pod.tick()
    assert after.outputs[0] == contract.Started(k)
    got = quiet.pcm + after.pcm
    assert len(got) == TICKS and got == want.pcm  # bit for bit: CPU, fp32, one thread
    assert quiet.tokens[:k] + after.tokens == want.tokens[:TICKS]


def test_the_time_out_comes_off_the_woken_lines_frames(tiny_model) -> None:
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=2, max_seconds=1.6))  # 20 frames
    call = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 40))
    for _ in range(5):
        pod.tick()
    parked = pod.engine.export(call.opened.id, park=True)
    assert isinstance(parked, engine.Parked)
    pod.calls.remove(call)
    woken = pod.handle.resume(contract.Session("NATF2", harness.SHORT_ROLE), parked, False, 10)
    assert isinstance(woken, Opened)
    after = harness.Call(woken, call.audio[5:])
    pod.calls.append(after)
    for _ in range(10):
        pod.tick()
    assert after.closed == contract.Closed(contract.CloseReason.EXPIRED, 10, 0, 0)  # 5 + 10 out + 5
