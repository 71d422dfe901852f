"""A streaming polyphase FIR resampler for the rational ratios the edge needs (3, 1/3, 3/2, 2/3).

Why not a library: every output must be exactly rate_out/rate_in times the input, block for block,
so one engine frame always becomes exactly `rate × 80 ms` samples, and the output must not depend
on how the network split the input. This resampler works in whole 10 ms blocks and in exact integer
arithmetic (int16 samples times Q20 coefficients, summed in int64), so the result is bit-identical
however the blocks are grouped into calls. Its filter starts from silence, which primes the delay
(about 1–2 ms) as leading zeros.

How: upsample by L, low-pass, keep every M-th sample. Output n sits at upsampled position nM with
polyphase branch r = nM mod L; the outputs of one branch are a strided window over the input, so a
block costs L strided matrix-vector products.
"""

from __future__ import annotations

import math

import numpy as np

BLOCK_MS = 10
"""Input is consumed in whole 10 ms blocks (gpt-live §5.3)."""

_TAPS_PER_PHASE = 32
"""Filter length is 32 × max(L, M) taps at the upsampled rate: ≥ 60 dB stop band."""

_KAISER_BETA = 7.0
_PASSBAND = 0.85
"""Cut-off as a fraction of the lower rate's Nyquist frequency."""

_Q = 20
"""Coefficient fixed-point bits; |x| < 2^15, taps < 2^7, so the sum stays far below 2^63."""


def _prototype(up: int, down: int) -> np.ndarray:
    """Windowed-sinc low-pass at the upsampled rate, gain `up`, as float64."""
    wide = max(up, down)
    n = _TAPS_PER_PHASE * wide
    cutoff = _PASSBAND * 0.5 / wide  # cycles per upsampled sample
    t = np.arange(n) - (n - 1) / 2
    h = 2 * cutoff * np.sinc(2 * cutoff * t) * np.kaiser(n, _KAISER_BETA)
    return h / h.sum() * up


class Resampler:
    """One direction of one session: feed int16 samples, get int16 samples at the other rate."""

    __slots__ = ("up", "down", "block_in", "block_out", "_taps", "_branches", "_history",
                 "_pending")

    def __init__(self, rate_in: int, rate_out: int) -> None:
        g = math.gcd(rate_in, rate_out)
        self.up, self.down = rate_out // g, rate_in // g
        self.block_in = rate_in * BLOCK_MS // 1000
        self.block_out = rate_out * BLOCK_MS // 1000
        if self.block_in % self.down or self.block_out % self.up:
            raise ValueError(f"{rate_in} -> {rate_out} Hz does not fit whole {BLOCK_MS} ms blocks")
        h = _prototype(self.up, self.down)
        self._taps = -(-len(h) // self.up)  # taps per polyphase branch
        padded = np.zeros(self._taps * self.up)
        padded[: len(h)] = h
        coefs = np.rint(padded * (1 << _Q)).astype(np.int64)
        # Branch s of the output pattern: phase r = sM mod L, first window start q = sM // L;
        # window element t multiplies coefficient h[r + L (taps-1-t)].
        self._branches = []
        for s in range(self.up):
            r, q = (s * self.down) % self.up, (s * self.down) // self.up
            g_s = coefs[r + self.up * np.arange(self._taps - 1, -1, -1)]
            self._branches.append((q, g_s))
        self._history = np.zeros(self._taps - 1, np.int64)
        self._pending = np.zeros(0, np.int16)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """Take int16 samples; return the output of every whole 10 ms block now complete."""
        if len(self._pending):
            samples = np.concatenate((self._pending, samples))
        whole = len(samples) - len(samples) % self.block_in
        self._pending = samples[whole:].copy()
        if not whole:
            return np.zeros(0, np.int16)
        buf = np.concatenate((self._history, samples[:whole].astype(np.int64)))
        self._history = buf[len(buf) - (self._taps - 1):]
        n_out = whole // self.block_in * self.block_out
        per_branch = n_out // self.up
        windows = np.lib.stride_tricks.sliding_window_view(buf, self._taps)
        out = np.empty(n_out, np.int64)
        for s, (q, g_s) in enumerate(self._branches):
            out[s::self.up] = windows[q::self.down][:per_branch] @ g_s
        out = (out + (1 << (_Q - 1))) >> _Q
        return np.clip(out, -32768, 32767).astype(np.int16)
