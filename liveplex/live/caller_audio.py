"""A session's caller audio, front end to engine: a `deque` per session (live-contract §4).

`AudioSender.send` appends on the loop, the engine drains on its thread between ticks; closing the
sender is the hangup (§4.4), and a sender garbage-collected closes itself, so a crashed handler
still frees its session.
"""

from __future__ import annotations

import time
import weakref
from collections import deque


class _AudioPipe:
    __slots__ = ("chunks", "texts", "closed", "__weakref__")

    def __init__(self) -> None:
        self.chunks: deque[tuple[int, bytes]] = deque()
        """(arrival ns on `time.perf_counter_ns`, bytes): the adaptive jitter buffer measures
        each frame's wait from its arrival (`live/playout.py`)."""
        self.texts: deque[str] = deque()
        """Text the model is asked to say (`session.commentary.append`), oldest first."""
        self.closed = False


def _close_audio(pipe: _AudioPipe) -> None:
    pipe.closed = True


class AudioSender:
    """The front end's end of a session's caller audio; closing it hangs the session up."""

    __slots__ = ("_pipe", "_finalizer", "__weakref__")

    def __init__(self, pipe: _AudioPipe) -> None:
        self._pipe = pipe
        self._finalizer = weakref.finalize(self, _close_audio, pipe)

    def send(self, data: bytes) -> None:
        """Queue caller bytes (any size); ignored once closed."""
        if not self._pipe.closed:
            self._pipe.chunks.append((time.perf_counter_ns(), data))

    def say(self, text: str) -> None:
        """Ask the model to say `text` (`session.commentary.append`); ignored once closed. The
        front end bounds each text (`gptlive.events.MAX_COMMENTARY_CHARS`), the engine the backlog."""
        if not self._pipe.closed:
            self._pipe.texts.append(text)

    def close(self) -> None:
        self._pipe.closed = True

    @property
    def closed(self) -> bool:
        return self._pipe.closed


class AudioReceiver:
    """The engine's end of a session's caller audio."""

    __slots__ = ("_pipe",)

    def __init__(self, pipe: _AudioPipe) -> None:
        self._pipe = pipe

    @property
    def closed(self) -> bool:
        """True once the front end hung up; read it before draining (live-contract §9)."""
        return self._pipe.closed

    def drain(self) -> list[tuple[int, bytes]]:
        """Every chunk queued so far with its arrival time, oldest first."""
        popleft = self._pipe.chunks.popleft
        return [popleft() for _ in range(len(self._pipe.chunks))]  # the front end may append meanwhile

    def drain_texts(self) -> list[str]:
        """Every text to say queued so far, oldest first (usually none: one cheap length check)."""
        texts = self._pipe.texts
        if not texts:
            return []
        return [texts.popleft() for _ in range(len(texts))]


def pipe() -> tuple[AudioSender, AudioReceiver]:
    """A new session's two ends of its caller audio."""
    shared = _AudioPipe()
    return AudioSender(shared), AudioReceiver(shared)
