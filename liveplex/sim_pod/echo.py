"""`Echo`, the sim's per-session core: the caller's frames played back late, one word per loud beat.

live-contract §12.2. Pure: a frame and its loudness in, a frame and maybe a word out. Frames are
s16le bytes, echoed untouched (no float round trip), and loudness is judged for every session of
a tick in one numpy pass (`loud_rows`), so a tick costs a few µs per session. Over a long call the
words read "I hear you loud and clear. I hear you ..." so tests and people can see the text path
work. Text the caller's app asks the agent to say (`say`) is spoken first, a word a frame, so a
`session.commentary.append` shows in the transcript.
"""

from __future__ import annotations

from collections import deque

import numpy as np

WORDS: tuple[str, ...] = ("I", "hear", "you", "loud", "and", "clear.")

MAX_SAY_WORDS = 1_000
"""Words of commentary a session may have waiting; words past it are dropped (about 80 s)."""

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

    __slots__ = ("_delay", "_said", "word_frames", "loud_frames", "words")

    def __init__(self, frame: int, echo_frames: int, word_frames: int) -> None:
        if word_frames <= 0:
            raise ValueError(f"word_frames must be > 0, got {word_frames}")
        silence = bytes(2 * frame)
        self._delay: deque[bytes] = deque(silence for _ in range(echo_frames))
        self._said: deque[str] = deque()
        self.word_frames = word_frames
        self.loud_frames = 0
        """Loud frames heard so far."""
        self.words = 0
        """Words said so far (echo words and commentary words)."""

    def say(self, text: str) -> None:
        """Queue `text`'s words to be said, one per frame, before any echo word."""
        self._said.extend(text.split()[:MAX_SAY_WORDS - len(self._said)])

    def step(self, heard: bytes, loud: bool) -> tuple[bytes, str | None]:
        """Hear one s16le frame (`loud` from `loud_rows`); return the frame heard `echo_frames`
        ago and maybe a word."""
        self._delay.append(heard)
        out = self._delay.popleft()
        beat = False
        if loud:
            self.loud_frames += 1
            beat = self.loud_frames % self.word_frames == 0
        if self._said:  # commentary first: an echo word whose beat falls meanwhile is not said
            return out, self._word(self._said.popleft())
        if not beat:
            return out, None
        return out, self._word(WORDS[(self.loud_frames // self.word_frames - 1) % len(WORDS)])

    def state(self) -> tuple[dict[str, object], bytes]:
        """What a handover carries: the counters and queued words, and the delayed frames end to end."""
        return {"loud_frames": self.loud_frames, "words": self.words, "said": list(self._said)}, b"".join(self._delay)

    def restore(self, loud_frames: int, words: int, said: list[str], delay: bytes) -> None:
        """Continue another engine's echo of the same shape (`state`)."""
        frame_bytes = len(self._delay[0]) if self._delay else 0
        if len(delay) != frame_bytes * len(self._delay) or len(said) > MAX_SAY_WORDS:
            raise ValueError(f"an echo of {len(delay)} delayed bytes and {len(said)} words does not fit")
        self._delay = deque(delay[i:i + frame_bytes] for i in range(0, len(delay), frame_bytes)) \
            if frame_bytes else deque()
        self._said = deque(said)
        self.loud_frames = loud_frames
        self.words = words

    def _word(self, w: str) -> str:
        self.words += 1
        return w if self.words == 1 else " " + w  # only the very first word has no space
