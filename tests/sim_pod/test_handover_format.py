"""`sim_pod.handover`, pure: a line's carried part and an echo to a blob and back, decoded once."""

from __future__ import annotations

import time

import pytest

from liveplex.continuity import Code, HandoverError
from liveplex.live import frames
from liveplex.live.jitter import caller_buffer
from liveplex.live.line import Carried
from liveplex.sim_pod import handover
from liveplex.sim_pod.echo import Echo
from liveplex.sim_pod.profile import SimProfile

PROFILE = SimProfile(echo_frames=2, word_frames=2)
INFO = PROFILE.info()


def _fresh() -> tuple:
    jitter = caller_buffer(frames.FRAME_SAMPLES, 0, PROFILE.jitter_frames, frames.PERIOD_NS, PROFILE.tick_groups)
    return jitter, Echo(frames.FRAME_SAMPLES, PROFILE.echo_frames, PROFILE.word_frames)


def test_a_blob_restores_the_line_and_the_echo_and_says_when_the_next_frame_is_due_in_one_decode() -> None:
    _, core = _fresh()
    core.say("two words")
    core.step(b"\x01\x02" * frames.FRAME_SAMPLES, True)
    carried = Carried(b"\x05\x06" * 10, b"\x07", True, 3, 4)
    due = time.perf_counter_ns()
    data = handover.export(INFO, "NATF2", 42, carried, core, due)
    jitter, restored = _fresh()
    got = handover.restore(data, INFO, "NATF2", jitter, restored)
    assert got.frames == 42
    assert got.next_due_unix_ns is not None
    assert abs(got.next_due_unix_ns - (due + frames.PERIOD_NS + time.time_ns() - time.perf_counter_ns())) < 5_000_000
    assert (jitter.pending(), jitter.odd, jitter.playing, jitter.underruns, jitter.dropped) == (
        carried.pending, carried.odd, True, 3, 4)
    assert restored.state() == core.state()
    jitter, restored = _fresh()
    assert handover.restore(handover.export(INFO, "NATF2", 1, carried, core, None), INFO, "NATF2", jitter,
                            restored).next_due_unix_ns is None


def test_a_record_restores_the_counts_only_and_a_blob_past_the_frames_is_refused() -> None:
    _, core = _fresh()
    for _ in range(4):
        core.step(b"\x01\x02" * frames.FRAME_SAMPLES, True)
    record = handover.record_head(INFO, "NATF2", 0, core) + handover.record_tick(1, core)
    jitter, restored = _fresh()
    got = handover.restore(record, INFO, "NATF2", jitter, restored)
    assert (got.frames, got.next_due_unix_ns, restored.loud_frames, restored.words) == (1, None, 4, core.words)
    carried = Carried(b"", b"", False, 0, 0)
    with pytest.raises(HandoverError) as refused:
        handover.restore(handover.export(INFO, "NATF2", INFO.max_frames, carried, core, None), INFO, "NATF2",
                         *_fresh())
    assert (refused.value.code, refused.value.param) == (Code.STATE, "header.frames")
