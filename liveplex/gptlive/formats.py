"""Per-session audio transcoding at the edge, so the engine only ever sees 24 kHz s16le (gpt-live §5.3).

`Inbound` turns appended chunks in the session format into engine audio; `Outbound` turns each
engine frame into exactly `rate × 80 ms` samples in the session format, so there is still one
`output_audio.delta` per frame. pcm/24000 passes through untouched; pcm/16000 is resampled;
G.711 μ-law and A-law at 8000 go through the lookup tables and the resampler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from liveplex.gptlive import g711
from liveplex.gptlive.events import AudioFormat
from liveplex.gptlive.resample import Resampler
from liveplex.live import frames

SERVED = (AudioFormat("audio/pcm", 24_000), AudioFormat("audio/pcm", 16_000),
          AudioFormat("audio/pcmu", 8_000), AudioFormat("audio/pcma", 8_000))
"""Every wire format a session may use (gpt-live §5.3), as `/live/config` lists them."""

MAX_CHUNK_MS = 30_000
"""gpt-live §6.1: an append of more than 30 s of audio is refused."""


@dataclass(frozen=True, slots=True)
class Codec:
    """How one wire format stores samples."""

    format: AudioFormat
    sample_bytes: int
    """1 for G.711, 2 for PCM16."""
    decode_table: np.ndarray | None
    encode_table: np.ndarray | None

    @property
    def native(self) -> bool:
        """Bytes on the wire are engine bytes: no work at all."""
        return self.format.type == "audio/pcm" and self.format.rate == frames.SAMPLE_RATE

    def max_chunk_bytes(self) -> int:
        return self.format.rate * MAX_CHUNK_MS // 1000 * self.sample_bytes

    def frame_bytes(self) -> int:
        """Bytes of one 80 ms engine frame in this format: 3840, 2560 or 640."""
        return self.format.rate * frames.FRAME_MS // 1000 * self.sample_bytes

    def to_samples(self, data: bytes) -> np.ndarray:
        if self.decode_table is None:
            return np.frombuffer(data, "<i2")
        return g711.decode(data, self.decode_table)

    def to_bytes(self, samples: np.ndarray) -> bytes:
        if self.encode_table is None:
            return samples.astype("<i2", copy=False).tobytes()
        return g711.encode(samples, self.encode_table)


def codec(fmt: AudioFormat) -> Codec:
    """The codec of an accepted format (events.parse has already refused the others)."""
    if fmt.type == "audio/pcmu":
        return Codec(fmt, 1, g711.ULAW_DECODE, g711.ULAW_ENCODE)
    if fmt.type == "audio/pcma":
        return Codec(fmt, 1, g711.ALAW_DECODE, g711.ALAW_ENCODE)
    return Codec(fmt, 2, None, None)


class Inbound:
    """Caller audio of one session: wire bytes -> 24 kHz s16le for the engine."""

    __slots__ = ("codec", "max_bytes", "_resampler", "_passthrough")

    def __init__(self, fmt: AudioFormat) -> None:
        self.codec = codec(fmt)
        self.max_bytes = self.codec.max_chunk_bytes()
        """The longest chunk an append may carry, in wire bytes."""
        self._resampler = (None if fmt.rate == frames.SAMPLE_RATE
                           else Resampler(fmt.rate, frames.SAMPLE_RATE))
        self._passthrough = self._resampler is None and self.codec.native

    def convert(self, data: bytes, muted: bool) -> bytes:
        """Engine bytes for a validated chunk (whole samples); muted audio becomes zeros of the
        same decoded length, still through the resampler so the timeline runs on. May return b""
        while a 10 ms block is incomplete."""
        if self._passthrough:
            return bytes(len(data)) if muted else data
        samples = self.codec.to_samples(data)
        if muted:
            samples = np.zeros(len(samples), np.int16)
        if self._resampler is not None:
            samples = self._resampler.feed(samples)
        return samples.astype("<i2", copy=False).tobytes()


class Outbound:
    """Model audio of one session: one 24 kHz engine frame -> exactly one frame in the format."""

    __slots__ = ("codec", "_resampler", "_passthrough")

    def __init__(self, fmt: AudioFormat) -> None:
        self.codec = codec(fmt)
        self._resampler = (None if fmt.rate == frames.SAMPLE_RATE
                           else Resampler(frames.SAMPLE_RATE, fmt.rate))
        self._passthrough = self.codec.native

    def convert(self, pcm: bytes) -> bytes:
        """`pcm` is one engine frame (FRAME_BYTES of s16le); raises ValueError otherwise when
        transcoding, since the output would no longer be one frame."""
        if self._passthrough:
            return pcm
        if len(pcm) != frames.FRAME_BYTES:
            raise ValueError(f"engine frame of {len(pcm)} bytes, expected {frames.FRAME_BYTES}")
        samples = np.frombuffer(pcm, "<i2")
        if self._resampler is not None:
            samples = self._resampler.feed(samples)
        return self.codec.to_bytes(samples)
