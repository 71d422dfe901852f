"""A hand-made `Ticker` for drive-loop tests: every session says one silent frame per tick."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from liveplex.live import CloseReason, LiveInfo
from liveplex.live.channel import LiveSubmission
from liveplex.live.jitter import Jitter
from liveplex.live.line import Line


class Silent:
    """Runs lines like a real engine; records every tick's `skipped`; can fail or stall."""

    def __init__(self, info: LiveInfo, during_tick: Callable[[int], None] | None = None,
                 words: Iterator[str | None] | None = None) -> None:
        self.info = info
        self.words = words
        """What each tick says with its frame (one item per session frame), if anything."""
        self.lines: list[Line] = []
        self.skips: list[int] = []
        self.batches: list[int] = []
        self.beats: list[tuple[int, int | None]] = []
        """Each tick's (group, due_ns)."""
        self.during_tick = during_tick
        self.ticked = threading.Event()

    def sessions(self) -> int:
        return len(self.lines)

    def take(self, sub: LiveSubmission) -> None:
        line = Line.start(sub, Jitter(self.info.frame_samples, 2, 4), self.info.max_frames)
        if line is not None:
            self.lines.append(line)

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        self.skips.append(skipped)
        self.beats.append((group, due_ns))
        kept = []
        for line in self.lines:
            reason = line.listen()
            if reason is not None:
                line.close(reason)
            else:
                kept.append(line)
        self.batches.append(len(kept))
        if self.during_tick is not None:
            self.during_tick(len(self.skips))
        pcm = bytes(2 * self.info.frame_samples)
        for line in kept:
            line.hear(skipped)  # consume the caller's frame like a model would
        self.lines = [line for line in kept
                      if line.say(pcm, None if self.words is None else next(self.words, None))]
        self.ticked.set()

    def export(self, session_id: int, park: bool = False) -> bytes | None:
        """The session's frame count as its blob (a real engine's is its whole state)."""
        for line in self.lines:
            if line.id == session_id and line.hand_over() is not None:
                self.lines.remove(line)
                return str(line.frames).encode()
        return None

    def abort(self) -> None:
        for line in self.lines:
            line.close(CloseReason.ABORTED)
        self.lines = []
