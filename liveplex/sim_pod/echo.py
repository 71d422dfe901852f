"""`Echo`, the sim's per-session core: the caller's frames played back late, one word per loud beat.

live-contract §12.2. Pure: a frame and its loudness in, a frame and maybe a word out. Frames are
s16le bytes, echoed untouched (no float round trip), and loudness is judged for every session of
a tick in one numpy pass (`loud_rows`), so a tick costs a few µs per session. Over a long call the
words read "I hear you loud and clear. I hear you ..." so tests and people can see the text path
work.
"""

from __future__ import annotations

from collections import deque

import numpy as np

WORDS: tuple[str, ...] = ("I", "hear", "you", "loud", "and", "clear.")

LOUD_MEAN_SQUARE = 1e-4
"""A frame is loud when its mean square (samples in [-1, 1)) exceeds this: RMS > 0.01, -40 dBFS."""

_FULL_SCALE_SQUARED = 32768.0 * 32768.0


def loud_rows(frames: np.ndarray) -> np.ndarray:
    """Which frames of int16 `[sessions, samples]` are loud (`LOUD_MEAN_SQUARE`); bool `[sessions]`.

    One pass over every session of a tick; float32 sums, so a frame within about 1e-6 of the
    threshold may fall either way.
    """
    x = frames.astype(np.float32)
    energy = np.einsum("ij,ij->i", x, x)
    return energy > np.float32(LOUD_MEAN_SQUARE * frames.shape[1] * _FULL_SCALE_SQUARED)


class Echo:
    """Delays the caller by `echo_frames` frames and says one word per `word_frames` loud frames."""

    __slots__ = ("_delay", "word_frames", "loud_frames", "words")

    def __init__(self, frame: int, echo_frames: int, word_frames: int) -> None:
        if word_frames <= 0:
            raise ValueError(f"word_frames must be > 0, got {word_frames}")
        silence = bytes(2 * frame)
        self._delay: deque[bytes] = deque(silence for _ in range(echo_frames))
        self.word_frames = word_frames
        self.loud_frames = 0
        """Loud frames heard so far."""
        self.words = 0
        """Words said so far."""

    def step(self, heard: bytes, loud: bool) -> tuple[bytes, str | None]:
        """Hear one s16le frame (`loud` from `loud_rows`); return the frame heard `echo_frames`
        ago and maybe a word."""
        self._delay.append(heard)
        out = self._delay.popleft()
        if not loud:
            return out, None
        self.loud_frames += 1
        if self.loud_frames % self.word_frames:
            return out, None
        w = WORDS[self.words % len(WORDS)]
        self.words += 1
        return out, w if self.words == 1 else " " + w  # only the very first word has no space
