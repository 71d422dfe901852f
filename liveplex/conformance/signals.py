"""Test audio for the checks: loud speech-like sound, silence, and their base64 (pure).

The sim engine calls a frame loud when its RMS exceeds 0.01 (live-contract §12.2), so the loud
signal keeps every 80 ms frame far above that: a 140 Hz voice with harmonics under a 4 Hz
syllable envelope that never drops below a third of its peak.
"""

from __future__ import annotations

import base64

import numpy as np

FRAME_MS = 80
"""One engine frame (gpt-live §10)."""

SAMPLE_RATE = 24_000
"""The engine's and the default session format's rate: audio/pcm at 24 kHz, s16le mono."""

BYTES_PER_MS = SAMPLE_RATE * 2 // 1000
"""s16le bytes per millisecond at 24 kHz (48)."""

DELTA_BYTES = {
    ("audio/pcm", 24_000): 3840,
    ("audio/pcm", 16_000): 2560,
    ("audio/pcmu", 8_000): 640,
    ("audio/pcma", 8_000): 640,
}
"""Decoded size of one output delta (80 ms) per session format (gpt-live §5.3)."""


def frames_in(ms: float) -> int:
    """Whole frames in a duration: `frames_in(500) == 6`, `frames_in(5000) == 62`."""
    return int(ms // FRAME_MS)


def speech(ms: int, rate: int = SAMPLE_RATE) -> bytes:
    """`ms` of loud speech-like s16le audio at `rate` (RMS about 0.3 of full scale)."""
    t = np.arange(rate * ms // 1000) / rate
    voice = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 6))
    envelope = 0.65 + 0.35 * np.sin(2 * np.pi * 4 * t)
    samples = 0.35 * envelope * voice / 1.6
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def silence(ms: int, rate: int = SAMPLE_RATE) -> bytes:
    """`ms` of digital silence, s16le at `rate`."""
    return bytes(2 * (rate * ms // 1000))


def b64(data: bytes) -> str:
    """Standard base64 with padding, as the SDK sends it."""
    return base64.b64encode(data).decode("ascii")


def is_zero(delta_b64: str) -> bool:
    """Whether a base64 s16le delta is all zeros (what the echo of muted input sounds like)."""
    return not any(base64.b64decode(delta_b64))
