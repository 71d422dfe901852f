"""Frame stamps and the echo round trip, on synthetic streams and arrivals (no socket, no clock)."""

from __future__ import annotations

import base64

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from liveplex.bench import roundtrip

FRAME = roundtrip.FRAME_BYTES
MS = 48
"""Bytes per ms of 24 kHz s16le: chunks are whole ms."""


def _speech(frames_n: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(frames_n * FRAME // 2) * 3000).astype("<i2").tobytes()


def _b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()


@given(st.integers(1, 250), st.integers(1, 12))
def test_any_chunking_stamps_every_frame_of_the_stream_once_and_nothing_else(chunk_ms: int, frames_n: int) -> None:
    stream = _speech(frames_n)
    size = chunk_ms * MS
    sent = b"".join(roundtrip.stamp(stream[k:k + size], k) for k in range(0, len(stream), size))
    assert len(sent) == len(stream)
    for n in range(frames_n):
        frame = sent[n * FRAME:(n + 1) * FRAME]
        assert roundtrip.index(_b64(frame)) == n
        assert frame[6:] == stream[n * FRAME + 6:(n + 1) * FRAME]  # only the 3 stamp samples change


def test_silence_speech_and_a_frame_off_the_grid_carry_no_stamp() -> None:
    stream = roundtrip.stamp(_speech(3), 0)
    assert roundtrip.index(_b64(bytes(FRAME))) is None
    assert roundtrip.index(_b64(_speech(1, seed=1))) is None
    assert roundtrip.index(_b64(stream[20 * MS:20 * MS + FRAME])) is None  # the jitter cap dropped 20 ms
    assert roundtrip.index("") is None and roundtrip.index("!!!!!!!!") is None


def test_a_frame_is_sent_with_the_chunk_that_completes_it_and_timed_on_its_echo() -> None:
    trips = roundtrip.RoundTrips()
    for k in range(8):  # 20 ms chunks, chunk k sent at k * 20 ms
        trips.sent((k + 1) * 20 * MS, k * 20_000_000)
    assert list(trips.sent_ns) == [60_000_000, 140_000_000]  # each frame's fourth chunk
    frames = roundtrip.stamp(_speech(2), 0)
    trips.heard(_b64(frames[:FRAME]), 700_000_000)
    trips.heard(_b64(frames[FRAME:]), 780_000_000)
    assert list(trips.rtt_us) == [640_000, 640_000]


def test_silence_a_repeated_or_earlier_index_and_one_not_sent_yet_are_not_counted() -> None:
    trips = roundtrip.RoundTrips()
    trips.sent(2 * FRAME, 0)
    frames = roundtrip.stamp(_speech(3), 0)
    heads = [_b64(frames[n * FRAME:(n + 1) * FRAME])[:roundtrip.STAMP_B64_CHARS] for n in range(3)]
    trips.heard(_b64(bytes(FRAME)), 1_000)
    trips.heard(heads[2], 2_000)  # frame 2 is not sent yet
    trips.heard(heads[1], 3_000)
    trips.heard(heads[1], 4_000)
    trips.heard(heads[0], 5_000)
    assert list(trips.rtt_us) == [3]
    assert (trips.repeated, trips.skipped) == (2, 0)  # frame 1 heard twice, frame 0 after it


def test_a_frame_never_heard_between_two_that_were_is_counted_skipped() -> None:
    trips = roundtrip.RoundTrips()
    trips.sent(4 * FRAME, 0)
    frames = roundtrip.stamp(_speech(4), 0)
    for n in (0, 1, 3):
        trips.heard(_b64(frames[n * FRAME:(n + 1) * FRAME])[:roundtrip.STAMP_B64_CHARS], 1_000)
    assert (trips.skipped, trips.repeated, len(trips.rtt_us)) == (1, 0, 3)


def test_the_floor_is_the_ideal_echo_frames_whatever_the_buffer_from_the_config_or_the_sim_default() -> None:
    """Issue 31: what a server adds is judged against a frame fed the moment it arrived."""
    for prebuffer in (0, 3, "3"):
        published = roundtrip.floor_of({"prebuffer_frames": prebuffer, "echo_frames": 4})
        assert (published.frames, published.ms) == (4, 320.0) and published.source.startswith("/live/config")
    defaults = roundtrip.floor_of({"model": "personaplex-7b"})
    assert (defaults.frames, defaults.ms) == (6, 480.0) and defaults.source.startswith("sim default")
    assert roundtrip.floor_of(None).ms == 0.0
