"""Seeded synthetic caller speech: buzzing syllables in phrases (live-contract §13.4).

Used when no recording is wanted; deterministic for a seed, so a session `i` with `seed + i`
sounds different from its neighbours but the same on every run.
"""

from __future__ import annotations

import numpy as np

MAX_SECONDS = 60.0
"""Longer inputs are looped, so no more than a minute is ever synthesised."""


def speech(seconds: float, rate: int, seed: int) -> np.ndarray:
    """`min(seconds, 60)` s of int16 mono speech-like audio at `rate` Hz.

    Phrases of 3–11 syllables with 0.3–1.2 s pauses; syllables 0.12–0.28 s long with 20–80 ms
    gaps, a harmonic buzz at f0 95–230 Hz drifting up to ±40 %, harmonics 1–7 weighted
    `1 / (1 + |h − formant|)` with the formant in [2, 6], envelope `sin²(πt)`, amplitude 5000.
    """
    rng = np.random.default_rng(seed)
    total = int(min(seconds, MAX_SECONDS) * rate)
    out = np.zeros(total, np.float64)
    pos = 0
    while pos < total:
        for _ in range(int(rng.integers(3, 12))):
            n = int(rng.uniform(0.12, 0.28) * rate)
            t = np.arange(n) / n
            f0 = rng.uniform(95, 230)
            drift = rng.uniform(-0.4, 0.4)
            phase = 2 * np.pi * np.cumsum(f0 * (1 + drift * t)) / rate
            formant = rng.uniform(2, 6)
            buzz = sum(np.sin(h * phase) / (1 + abs(h - formant)) for h in range(1, 8))
            syllable = buzz * np.sin(np.pi * t) ** 2 * 5000
            end = min(total, pos + n)
            out[pos:end] = syllable[: end - pos]
            pos = end + int(rng.uniform(0.02, 0.08) * rate)
            if pos >= total:
                break
        pos += int(rng.uniform(0.3, 1.2) * rate)
    return np.clip(out, -32768, 32767).astype(np.int16)
