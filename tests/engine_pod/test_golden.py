"""Engine-level golden tests through the serving path (channel, `Line`, jitter, Mimi, detokenizer).

Tiny model, CPU fp32, greedy, context 40 so the sessions run past the window. Two sessions started
in the same tick with the same voice, prompt and audio are bit-identical; a session started 5
ticks later (another voice, prompt and audio; the batch grows from 2 to 3, another bucket) matches
a run in which it was alone; a freed slot filled with garbage is clean for the next session.
"""

from __future__ import annotations

import pytest
import torch

from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(300)

TICKS = 40


@pytest.fixture(scope="module")
def tiny_model(tiny_dir):
    return harness.load(tiny_dir, context=40)


def _run_c_alone(tiny_model) -> harness.Call:
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=1))
    c = pod.start("NATM1", "Hello world.", harness.caller_audio(3, TICKS))
    for _ in range(TICKS - 5):
        pod.tick()
    return c


def test_same_tick_twins_are_bit_identical_and_a_late_session_matches_its_solo_run(tiny_model):
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=4))
    audio = harness.caller_audio(1, TICKS)
    a = pod.start("NATF2", harness.SHORT_ROLE, audio)
    b = pod.start("NATF2", harness.SHORT_ROLE, audio)
    c = None
    for t in range(TICKS):
        if t == 5:
            c = pod.start("NATM1", "Hello world.", harness.caller_audio(3, TICKS))
        pod.tick()
    assert c is not None and pod.engine.running == 3
    assert a.pcm == b.pcm and a.text == b.text and a.tokens == b.tokens and len(a.pcm) == TICKS
    assert a.pcm != c.pcm[: len(a.pcm)]
    harness.assert_same_tokens_close_audio(c, _run_c_alone(tiny_model))


def test_a_freed_slot_full_of_garbage_is_clean_for_the_next_session(tiny_model):
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=1))
    first = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    for _ in range(8):
        pod.tick()
    first.opened.audio.close()
    pod.tick()
    assert first.closed is not None and pod.engine.running == 0
    gen = torch.Generator().manual_seed(0)
    pools = pod.engine.pools
    for t in pools.kv.k + pools.kv.v + pools.codec.tensors():
        if t.is_floating_point():
            t.copy_(torch.randn(t.shape, generator=gen) * 100)
    c = pod.start("NATM1", "Hello world.", harness.caller_audio(3, TICKS))
    for _ in range(TICKS - 5):
        pod.tick()
    harness.assert_same_tokens_close_audio(c, _run_c_alone(tiny_model))
