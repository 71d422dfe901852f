"""A newcomer hears its caller from the first tick it runs (issue 12): its first served tick takes the
audio queued for it before the row's step reads the jitter buffer, so it runs exactly `prebuffer`
frames behind its caller, never one more.

The caller is a real-time one (one 80 ms frame before every tick, `harness.Pod.tick`), optionally
with `head` frames sent at once before the first tick. Before tick t (1-based) `head + t` frames are
queued, so playout starts in the first tick with `head + t >= prebuffer`, and not before the tick the
session's prefill completes in. Tiny model, CPU fp32; the observable is the caller frame the model
got in each tick (`Call.heard`, the row of `pools.pcm_in`).
"""

from __future__ import annotations

import numpy as np
import pytest

from liveplex.live import contract
from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(300)

PREBUFFER = 2
NO_BUDGET = 1e-6
"""ms: each tick prefills only the queue head's minimum chunk, so the prompt takes several ticks."""


def _first_heard_tick(tiny_model, head: int, **overrides: object) -> tuple[int, int]:
    """(the tick that ran the first caller frame, the tick `Started` came in), ticks counted from 1."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=2, prebuffer_frames=PREBUFFER, **overrides))
    audio = harness.caller_audio(3, 16)
    call = pod.start("NATF2", harness.SHORT_ROLE, audio)
    if head:
        call.opened.audio.send(b"".join(audio[:head]))
        call.fed = head
    started = heard = 0
    for tick in range(1, 12):
        ran = len(call.heard)
        pod.tick()
        started = started or (tick if call.outputs else 0)  # `Started` is its first output
        heard = heard or (tick if len(call.heard) > ran and call.heard[-1].any() else 0)
    assert started and heard, "the session never started or never heard its caller"
    frames_in = [np.frombuffer(a, "<i2").astype(np.float32) / np.float32(32768) for a in audio]
    for i, h in enumerate(call.heard[heard - started:]):  # from there the caller's frames in order
        np.testing.assert_array_equal(h.numpy(), frames_in[i])
    return heard, started


@pytest.mark.parametrize("head", [0, PREBUFFER - 1])
def test_a_newcomer_hears_its_caller_exactly_prebuffer_frames_after_the_first_append(tiny_model, head):
    heard, started = _first_heard_tick(tiny_model, head)
    assert started == 1  # the tiny prompt is prefilled in the tick it is admitted in
    assert heard == PREBUFFER - head


def test_audio_queued_during_a_chunked_prefill_is_heard_in_the_first_served_tick(tiny_model):
    heard, started = _first_heard_tick(tiny_model, 0, prefill_budget_ms=NO_BUDGET)
    assert started >= PREBUFFER  # the prompt took as many ticks as the prebuffer holds, or more
    assert heard == started


def test_a_caller_who_hung_up_during_the_prefill_is_started_and_closed_in_the_same_tick(tiny_model):
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=2, prefill_budget_ms=NO_BUDGET))
    call = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(3, 12))
    pod.tick()
    call.opened.audio.close()
    while call.closed is None:
        pod.tick()
    kinds = [type(o) for o in call.outputs]
    assert kinds == [contract.Started, contract.Closed]
    assert call.closed.reason is contract.CloseReason.HANGUP and call.closed.frames == 0
    assert pod.engine.sessions() == 0
