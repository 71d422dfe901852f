"""The quiet caller profile (issue 43): its stamps, what a wake is timed at, the timeline across a
pause, and a short run against a real pausing pod (`bench duplex --caller speak1of4`)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from liveplex.bench import audio, duplex, talk, timeline
from liveplex.live import frames
from liveplex.pod import vad
from tests.conformance import servers

TALK = talk.PROFILES["speak1of4"]
assert TALK is not None
MS = 1_000_000


def _cycle() -> np.ndarray:
    assert TALK is not None
    return talk.shape(audio.read_wav(audio.recording_path(), frames.SAMPLE_RATE), TALK, frames.SAMPLE_RATE)


def _frame(cycle: np.ndarray, j: int) -> bytes:
    return cycle[j * frames.FRAME_SAMPLES:(j + 1) * frames.FRAME_SAMPLES].astype("<i2").tobytes()


def _head(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()[:talk.STAMP_B64_CHARS]


def test_every_frame_reads_back_its_index_and_unstamped_audio_reads_none() -> None:
    cycle = _cycle()
    assert TALK is not None and len(cycle) == TALK.cycle_frames * frames.FRAME_SAMPLES
    assert [talk.index(_head(_frame(cycle, j))) for j in range(TALK.cycle_frames)] == list(range(TALK.cycle_frames))
    raw = audio.read_wav(audio.recording_path(), frames.SAMPLE_RATE)
    assert talk.index(_head(bytes(frames.FRAME_BYTES))) is None
    assert all(talk.index(_head(_frame(raw, j))) is None for j in range(50))


def test_the_silence_stays_under_the_detectors_gate_and_the_speech_is_speech() -> None:
    """A full-scale stamp would lift each silent frame over the gate; the quiet one costs no call."""
    model, cycle = vad.Silero(), _cycle()
    stream = model.stream()
    assert TALK is not None
    speech = round(TALK.speak_s * 1000) // frames.FRAME_MS
    probs = [stream.prob(_frame(cycle, j)) for j in range(speech)]
    assert max(probs) > 0.9
    calls = model.calls
    assert all(stream.prob(_frame(cycle, j)) == 0.0 for j in range(speech + 1, TALK.cycle_frames))
    assert model.calls == calls
    assert talk.onset_frame(cycle) == 0


def test_a_wake_is_timed_from_the_onset_and_its_pre_roll_counted_from_the_jump() -> None:
    """The echo after a wake plays the frames the session held at its pause first (no jump), then
    the pre-roll: 3 frames sent before `session.resumed`, then live ones (not counted)."""
    assert TALK is not None
    cycle, n = _cycle(), TALK.cycle_frames
    wakes = talk.Wakes(TALK, onset=talk.onset_frame(cycle))

    def send(k: int) -> None:
        wakes.sent((k + 1) * frames.FRAME_BYTES, k * 80 * MS)

    def hear(k: int) -> None:
        wakes.heard(_head(_frame(cycle, k % n)), (k + 6) * 80 * MS + 2 * MS)  # the sim's 6-frame echo, 2 ms back

    for k in range(26):  # active: each frame echoed 6 frames later
        send(k)
        if k >= 6:
            hear(k - 6)
    for k in range(26, n + 2):  # paused; frame n + 1 (the next cycle's second) wakes it
        send(k)
    wakes.resumed((n + 1) * 80 * MS + 5 * MS)
    for k in (*range(20, 26), n - 1, n, n + 1):  # what it held at the pause, then the jump to the pre-roll
        hear(k)
    send(n + 2)
    hear(n + 2)  # sent after the resume: live, not pre-roll
    assert list(wakes.wake_ms) == [85.0]
    assert list(wakes.pre_roll_ms) == [240.0]
    assert list(wakes.onset_echo_ms) == [482.0]  # the onset frame n, in the pre-roll, heard


def test_a_pause_is_neither_lateness_nor_a_stall() -> None:
    line = timeline.Timeline(frames.SAMPLE_RATE, 2, 120 * MS)
    for k in range(5):
        line.audio(k * 80 * MS, frames.FRAME_BYTES)
    line.resume()
    for k in range(5):
        line.audio(10_000 * MS + k * 80 * MS, frames.FRAME_BYTES)
    assert max(line.lateness_us) == 0 and line.underrun_ms == 0
    without = timeline.Timeline(frames.SAMPLE_RATE, 2, 120 * MS)  # the same gap without the resume
    for at in [k * 80 for k in range(5)] + [10_000 + k * 80 for k in range(5)]:
        without.audio(at * MS, frames.FRAME_BYTES)
    assert without.underrun_ms > 9_000


@pytest.mark.timeout(60)
def test_quiet_callers_pause_and_wake_on_a_pausing_pod(tmp_path: Path) -> None:
    """Two callers speaking 1 s in 4 against a sim pod pausing after 1 s: each pauses and wakes
    at least once, the model hears at least 200 ms from before each wake, no wake is refused and
    the level is clean."""
    report = tmp_path / "talk.json"
    with servers.serve("--idle-pause-s", "1", "--max-sessions", "4", log=tmp_path / "serve.log") as base_url:
        code = duplex.main(["--base-url", base_url, "--caller", "speak1of4", "--sessions", "2", "--seconds", "5",
                            "--chunk-ms", "80", "--no-progress", "--strict", "--out", str(report)])
    assert code == 0
    body = json.loads(report.read_text())
    (level,), (records,) = body["levels"], body["records"]
    assert level["clean"] and level["pauses"] >= 2
    assert level["server"]["refused_wakes"] == 0 and level["server"]["wakes"] >= 2
    assert level["pre_roll_ms"]["count"] == level["server"]["wakes"]
    assert all(ms >= 200 for r in records for ms in r["pre_roll_ms"])
    assert 0 < level["wake_ms"]["max"] < 500
    assert level["onset_echo_ms"]["count"] == level["pre_roll_ms"]["count"]  # every onset reached the model


@pytest.mark.parametrize("flags", [("--format", "audio/pcmu"), ("--rate", "16000"), ("--echo-rtt",)])
def test_the_quiet_caller_refuses_what_would_break_its_stamps(flags: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as exited:
        duplex.parse(["--caller", "speak5of60", *flags])
    assert exited.value.code == 2
