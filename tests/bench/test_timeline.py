"""Frame lateness, playback and transcript order of one session (live-contract §13.2, §14.28)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.bench import timeline

RATE = 24_000
FRAME = 1920
FRAME_BYTES = FRAME * 2
FRAME_NS = 80_000_000
PLAYOUT_NS = 120_000_000


def _timeline() -> timeline.Timeline:
    return timeline.Timeline(RATE, 2, PLAYOUT_NS)


@given(t0=st.integers(0, 10**12), frames=st.integers(1, 100))
def test_a_perfectly_paced_stream_has_zero_lateness(t0: int, frames: int) -> None:
    tl = _timeline()
    for n in range(frames):
        tl.audio(t0 + n * FRAME_NS, FRAME_BYTES)
    assert list(tl.lateness_us) == [0] * frames
    assert tl.underrun_ms == 0


@given(delayed=st.integers(1, 20), delay_us=st.integers(1, 60_000))
def test_one_frame_delayed_by_d_has_lateness_d(delayed: int, delay_us: int) -> None:
    tl = _timeline()
    for n in range(25):
        tl.audio(n * FRAME_NS + (delay_us * 1000 if n == delayed else 0), FRAME_BYTES)
    expected = [delay_us if n == delayed else 0 for n in range(25)]
    assert list(tl.lateness_us) == expected


def test_early_frames_count_as_on_time_and_lateness_is_against_the_first_frame() -> None:
    tl = _timeline()
    tl.audio(1_000_000_000, FRAME_BYTES)  # t0
    tl.audio(1_050_000_000, FRAME_BYTES)  # 30 ms early: a burst
    tl.audio(1_200_000_000, FRAME_BYTES)  # slot 1160 ms: 40 ms late
    assert list(tl.lateness_us) == [0, 0, 40_000]


def test_lateness_within_the_playout_buffer_does_not_stall_the_player() -> None:
    tl = _timeline()
    tl.audio(0, FRAME_BYTES)
    tl.audio(FRAME_NS + 119_000_000, FRAME_BYTES)  # 119 ms late, inside the 120 ms buffer
    assert tl.lateness_us[1] == 119_000
    assert tl.underrun_ms == 0


def test_lateness_beyond_the_playout_buffer_stalls_by_the_excess() -> None:
    tl = _timeline()
    tl.audio(0, FRAME_BYTES)
    tl.audio(FRAME_NS + 150_000_000, FRAME_BYTES)  # 150 ms late: 30 ms past the buffer
    assert tl.underrun_ms == pytest.approx(30.0)


def test_samples_of_uneven_deltas_place_the_slots() -> None:
    tl = _timeline()
    tl.audio(0, 960)  # 20 ms
    tl.audio(20_000_000, 2 * 960)  # slot 20 ms: on time
    tl.audio(65_000_000, 960)  # slot 60 ms: 5 ms late
    assert list(tl.lateness_us) == [0, 0, 5_000]
    assert tl.samples == 4 * 480
    assert tl.audio_ms == 80.0


def test_a_backwards_arrival_fails_with_a_clear_error() -> None:
    tl = _timeline()
    tl.audio(1_000_000, FRAME_BYTES)
    with pytest.raises(timeline.TimelineError, match="went backwards"):
        tl.audio(999_999, FRAME_BYTES)


def test_a_partial_sample_fails() -> None:
    with pytest.raises(timeline.TimelineError, match="whole number"):
        _timeline().audio(0, 3839)


def test_an_empty_delta_fails() -> None:
    with pytest.raises(timeline.TimelineError, match="whole number"):
        _timeline().audio(0, 0)


def test_transcript_follows_its_audio() -> None:
    tl = _timeline()
    tl.audio(0, FRAME_BYTES)
    tl.text(0, "I")
    tl.audio(FRAME_NS, FRAME_BYTES)
    tl.text(80, " hear")
    assert "".join(tl.transcript) == "I hear"


def test_transcript_before_its_audio_is_out_of_order() -> None:
    tl = _timeline()
    tl.audio(0, FRAME_BYTES)
    with pytest.raises(timeline.TimelineError, match="before its audio"):
        tl.text(80, "early")


def test_transcript_going_back_in_time_is_out_of_order() -> None:
    tl = _timeline()
    for n in range(3):
        tl.audio(n * FRAME_NS, FRAME_BYTES)
    tl.text(160, "late")
    with pytest.raises(timeline.TimelineError, match="transcript went backwards"):
        tl.text(80, "earlier")
