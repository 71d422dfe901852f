"""Frame arithmetic: 80 ms frames of 24 kHz mono s16le audio (live-contract §2.1)."""

from __future__ import annotations

SAMPLE_RATE = 24_000
"""Hz: the model codec's rate; the engine only ever sees this rate."""

FRAME_SAMPLES = 1_920
"""Samples in one codec frame, in and out."""

FRAME_BYTES = FRAME_SAMPLES * 2
"""Bytes of one frame as s16le mono (3840)."""

FRAME_MS = FRAME_SAMPLES * 1_000 // SAMPLE_RATE
"""Milliseconds per frame (80)."""

PERIOD_NS = FRAME_SAMPLES * 1_000_000_000 // SAMPLE_RATE
"""Nanoseconds per tick (80_000_000); all clock arithmetic is in integer ns."""
