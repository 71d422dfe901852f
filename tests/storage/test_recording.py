"""A stored call's recording is put together from what its gateway relayed (`recording.Mixer`) and
from its chunks (`layout.assemble`), and a WAV reader reads it back: both channels on the agent's
timeline, mute as silence, a gap (a lost gateway's last seconds) as silence of its length, other
formats decoded to 24 kHz."""

from __future__ import annotations

import base64
import io
import wave

import numpy as np
import orjson
import pytest

from liveplex.gptlive import events
from liveplex.live import frames
from liveplex.storage import layout
from liveplex.storage.recording import MAX_CALLER_BACKLOG_FRAMES, Mixer
from liveplex.storage.store import Entry

N = frames.FRAME_SAMPLES
PCM24 = events.AudioFormat("audio/pcm", 24_000)


def _append(samples: np.ndarray) -> str:
    audio = base64.b64encode(samples.astype("<i2").tobytes()).decode()
    return orjson.dumps({"type": "session.input_audio.append", "audio": audio}).decode()


def _delta(samples: np.ndarray) -> str:
    return events.dump(events.OutputAudioDelta(base64.b64encode(samples.astype("<i2").tobytes()).decode()))


def _channels(pcm: bytes) -> tuple[np.ndarray, np.ndarray]:
    both = np.frombuffer(pcm, "<i2")
    return both[0::2], both[1::2]


def test_each_agent_frame_takes_the_caller_audio_that_came_before_it() -> None:
    mixer = Mixer(PCM24)
    caller = np.arange(2 * N, dtype=np.int16)
    mixer.caller(_append(caller[: N // 2]))  # 20 ms chunks, as the SDK's apps send them
    mixer.caller(_append(caller[N // 2: N]))
    mixer.agent(_delta(np.full(N, 7)))
    mixer.agent(_delta(np.full(N, 9)))  # the caller sent nothing for this frame: silence
    mixer.caller('{"type":"session.input_audio.mute"}')
    mixer.caller(_append(caller[N:]))
    mixer.caller('{"type":"session.input_audio.unmute"}')
    mixer.agent(_delta(np.full(N, 11)))
    mixer.event('{"type":"session.output_transcript.delta","delta":"hi"}')
    first, pcm, lines = mixer.take()
    assert first == 0 and len(pcm) == 3 * layout.FRAME_BYTES
    ours, theirs = _channels(pcm)
    assert np.array_equal(ours[:N], caller[:N]) and not ours[N:].any()  # then nothing, then muted
    assert np.array_equal(theirs, np.repeat(np.array([7, 9, 11], np.int16), N))
    assert [orjson.loads(line) for line in lines.splitlines()] == [
        {"frame": 3, "event": {"type": "session.output_transcript.delta", "delta": "hi"}}]
    assert mixer.take() == (3, b"", b"")


def test_caller_audio_far_ahead_of_the_agent_is_bounded_oldest_first() -> None:
    mixer = Mixer(PCM24)
    for i in range(MAX_CALLER_BACKLOG_FRAMES + 5):
        mixer.caller(_append(np.full(N, i)))
    mixer.agent(_delta(np.zeros(N)))
    ours, _ = _channels(mixer.take()[1])
    assert (ours == 5).all() and mixer.dropped_bytes == 5 * N * 2


def test_g711_calls_are_recorded_at_24_khz() -> None:
    mixer = Mixer(events.AudioFormat("audio/pcmu", 8_000), first_frame=40)
    tone = (np.sin(np.arange(3 * 640) * 2 * np.pi * 400 / 8000) * 8000).astype(np.int16)
    from liveplex.gptlive import formats

    wire = formats.Outbound(events.AudioFormat("audio/pcmu", 8_000))
    for i in range(3):
        frame = tone[i * 640:(i + 1) * 640]
        up = np.repeat(frame, 3)  # a 24 kHz frame, through the pod's own encoder
        encoded = wire.convert(up.astype("<i2").tobytes())
        mixer.agent(events.dump(events.OutputAudioDelta(base64.b64encode(encoded).decode())))
    first, pcm, _ = mixer.take()
    _, theirs = _channels(pcm)
    assert first == 40 and len(theirs) == 3 * N
    assert np.abs(theirs[N:]).max() > 4000  # the tone, decoded and resampled (past the filter's delay)


@pytest.mark.parametrize("broken", ['{"type":"session.input_audio.append","audio":"!!"}', "not json", "[1]",
                                    '{"type":"session.input_audio.append","audio":"AA=="}'])
def test_frames_the_pod_refuses_are_no_audio(broken: str) -> None:
    mixer = Mixer(PCM24)
    mixer.caller(broken)
    mixer.agent(_delta(np.ones(N)))
    ours, _ = _channels(mixer.take()[1])
    assert not ours.any()


def test_chunks_assemble_into_one_wav_with_gaps_as_silence() -> None:
    def key(frame: int) -> str:
        return layout.audio_key("sess_a", frame)

    chunks = [Entry(key(0), 3 * layout.FRAME_BYTES), Entry(key(5), 2 * layout.FRAME_BYTES),
              Entry(key(6), 2 * layout.FRAME_BYTES), Entry(layout.events_key("sess_a", 0), 99)]
    pieces, total = layout.assemble(chunks)
    assert pieces == [layout.Piece(key(0), 0, 3 * layout.FRAME_BYTES), layout.Piece(None, 0, 2 * layout.FRAME_BYTES),
                      layout.Piece(key(5), 0, 2 * layout.FRAME_BYTES),
                      layout.Piece(key(6), layout.FRAME_BYTES, layout.FRAME_BYTES)]  # the overlap cut
    assert total == 8 * layout.FRAME_BYTES
    body = layout.wav_header(total) + bytes(total)
    with wave.open(io.BytesIO(body)) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 24_000, 2)
        assert wav.getnframes() == 8 * N
    assert layout.assemble([]) == ([], 0)


def test_meta_round_trips_and_knows_its_owner() -> None:
    meta = layout.Meta("sess_a", "ab" * 32, 1_700_000_000, "2027-01-06", {"id": "sess_a", "store": True})
    again = layout.Meta.load(meta.dump())
    assert again == meta and again.owned_by("ab" * 32) and not again.owned_by("cd" * 32)
    assert layout.Meta.load(b"{}") is None and layout.Meta.load(b"\xff") is None
