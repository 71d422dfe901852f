"""The caller's pure pieces: its `session.start` and its base64 arithmetic."""

from __future__ import annotations

import base64

import orjson
from hypothesis import given
from hypothesis import strategies as st

from liveplex.bench import caller, duplex


def _settings(**changes: object) -> caller.CallSettings:
    base = {"url": "ws://x", "model": "m", "voice": None, "instructions": None,
            "audio_format": "audio/pcm", "rate": 24000, "seconds": 1.0, "chunk_ms": 20,
            "playout_ms": 120}
    return caller.CallSettings(**{**base, **changes})  # type: ignore[arg-type]


def test_session_start_always_declares_the_format() -> None:
    assert orjson.loads(_settings().start_event()) == {"type": "session.start", "session": {
        "model": "m", "audio": {"format": {"type": "audio/pcm", "rate": 24000}}}}


def test_voice_and_instructions_are_sent_when_given() -> None:
    session = orjson.loads(_settings(voice="marin", instructions="Be brief.").start_event())["session"]
    assert session["audio"]["output"] == {"voice": "marin"}
    assert session["instructions"] == "Be brief."


def test_store_is_sent_only_when_asked() -> None:
    assert "store" not in orjson.loads(_settings().start_event())["session"]
    stored = duplex.parse(["--store"]).call_settings("m", "ws://x")  # `bench duplex --store`
    assert orjson.loads(stored.start_event())["session"]["store"] is True


def test_chunks_cover_the_seconds_rounding_up() -> None:
    assert _settings(seconds=1.5, chunk_ms=20).chunks == 75
    assert _settings(seconds=1.01, chunk_ms=80).chunks == 13
    assert _settings(audio_format="audio/pcmu", rate=8000, chunk_ms=20).chunk_bytes == 160


@given(st.binary(max_size=4000), st.booleans())
def test_b64_length_is_the_decoded_length_padded_or_not(data: bytes, padded: bool) -> None:
    text = base64.b64encode(data).decode()
    assert caller.b64_length(text if padded else text.rstrip("=")) == len(data)
