"""`Echo`, the sim's per-session core: the caller's frames played back late, one word per loud beat.

live-contract §12.2. Pure: frames in, a frame and maybe a word out. Over a long call the words
read "I hear you loud and clear. I hear you ..." so tests and people can see the text path work.
"""

from __future__ import annotations

from collections import deque

import numpy as np

WORDS: tuple[str, ...] = ("I", "hear", "you", "loud", "and", "clear.")

LOUD_MEAN_SQUARE = 1e-4
"""A frame is loud when its mean square exceeds this: RMS > 0.01, about -40 dBFS."""


class Echo:
    """Delays the caller by `echo_frames` frames and says one word per `word_frames` loud frames."""

    __slots__ = ("_delay", "word_frames", "loud_frames", "words")

    def __init__(self, frame: int, echo_frames: int, word_frames: int) -> None:
        if word_frames <= 0:
            raise ValueError(f"word_frames must be > 0, got {word_frames}")
        silence = np.zeros(frame, np.float32)
        self._delay: deque[np.ndarray] = deque(silence for _ in range(echo_frames))
        self.word_frames = word_frames
        self.loud_frames = 0
        """Loud frames heard so far."""
        self.words = 0
        """Words said so far."""

    def step(self, heard: np.ndarray) -> tuple[np.ndarray, str | None]:
        """Hear one frame (float32); return the frame heard `echo_frames` ago and maybe a word."""
        loud = float(np.dot(heard, heard)) > LOUD_MEAN_SQUARE * len(heard)
        self._delay.append(heard)
        out = self._delay.popleft()
        word = None
        if loud:
            self.loud_frames += 1
            if self.loud_frames % self.word_frames == 0:
                w = WORDS[self.words % len(WORDS)]
                word = w if self.words == 0 else " " + w  # only the very first word has no space
                self.words += 1
        return out, word
