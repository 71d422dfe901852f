"""Padding rows: a bucket's rows past the running sessions run silence at position 0.

A tick over B sessions runs the smallest bucket >= B; its spare rows are free slots whose last
session may have left a late position there. Run from it, a padding row would attend over that
session's whole window (on a GPU, a full-ring attention per padding row, every tick).
"""

from __future__ import annotations

import pytest

from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(120)


def test_a_freed_slot_pads_the_bucket_from_position_0_with_silence(tiny_dir):
    m = harness.load(tiny_dir, context=40)
    pod = harness.Pod(*harness.build(m, max_sessions=2, buckets=(2,)))  # one bucket: 2 rows
    stays = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 12))
    leaves = pod.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(2, 12))
    for _ in range(4):
        pod.tick()
    assert pod.engine.slot_of(leaves.opened.id) == 1
    pools = pod.engine.pools
    assert int(pools.tokens.pos[1]) > 1  # the prompt and four frames
    leaves.opened.audio.close()
    for _ in range(3):
        pod.tick()  # one session in a bucket of two: slot 1 pads
        assert pod.engine.running == 1 and pod.engine.slot_of(stays.opened.id) == 0
        assert int(pools.tokens.pos[1]) == 1  # ran at position 0, as a fresh slot would
        assert not pools.pcm_in[1].any()
    assert leaves.closed is not None and len(stays.pcm) == 7
