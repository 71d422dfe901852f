"""A PersonaPlex session paused (exported into the pod's memory) and woken (resumed from that blob
on the same engine, `outside_frames` later) continues bit-exact against its twin that never paused,
fed the same caller frames (issue 43, docs/pause.md): the model's positions go on from where they
were, so it perceives no gap; its neighbour ran on meanwhile; and the time out comes off the woken
line's `max_frames`."""

from __future__ import annotations

import pytest

from liveplex.live import contract
from liveplex.live.channel import Opened
from tests.engine_pod import harness

TICKS = 20


def _pod(model) -> harness.Pod:
    return harness.Pod(*harness.build(model, max_sessions=3, greedy=False, seed=11, buckets=(3,),
                                      prefill_budget_ms=10_000.0, jitter_frames=48))


@pytest.mark.parametrize("k, paused", [(6, 9)])
def test_a_paused_and_woken_session_continues_exactly(tiny_model, k: int, paused: int) -> None:
    twin, pod = _pod(tiny_model), _pod(tiny_model)
    session = contract.Session("NATF2", harness.SHORT_ROLE)
    for p in (twin, pod):  # the same submission ids, so the same seeds; a neighbour in each batch
        p.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(5, TICKS + paused))
    want = twin.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    quiet = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    for _ in range(k):
        pod.tick()
    blob = pod.engine.export(quiet.opened.id)  # the pause
    assert isinstance(blob, bytes)
    quiet.collect()
    assert quiet.closed == contract.Closed(contract.CloseReason.HANDED_OVER, k, 0, 0)
    pod.calls.remove(quiet)
    for _ in range(paused):  # out of the batch: the neighbour runs alone
        pod.tick()
        assert pod.engine.running == 1
    woken = pod.handle.resume(session, blob, False, paused)  # the wake
    assert isinstance(woken, Opened)
    after = harness.Call(woken, quiet.audio[quiet.fed:])
    pod.calls.append(after)
    for _ in range(TICKS):
        twin.tick()
    for _ in range(TICKS - k):
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
    blob = pod.engine.export(call.opened.id)
    assert isinstance(blob, bytes)
    pod.calls.remove(call)
    woken = pod.handle.resume(contract.Session("NATF2", harness.SHORT_ROLE), blob, False, 10)
    assert isinstance(woken, Opened)
    after = harness.Call(woken, call.audio[5:])
    pod.calls.append(after)
    for _ in range(10):
        pod.tick()
    assert after.closed == contract.Closed(contract.CloseReason.EXPIRED, 10, 0, 0)  # 5 + 10 out + 5
