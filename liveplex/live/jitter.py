"""The per-session jitter buffer: caller audio in chunks of any size out as whole 80 ms frames.

live-contract §5. Samples are kept as raw s16le bytes in a `bytearray` (appending and trimming
the front are memmoves, far cheaper than per-sample work); a trailing odd byte is carried to the
next push so any byte split of the same stream yields the same samples. Playout starts once
`prebuffer` frames are buffered; running dry while playing counts one underrun and waits for the
prebuffer again; past `max_frames` the oldest whole frames are dropped.

With a `Playout` policy (`live/playout.py`) the buffer is adaptive: each push may carry its arrival
time, each pop the due time of its tick, and the buffer tells the policy how long the frame it plays
waited. What the policy gives back comes out as `earlier`, the steps the engine should move the
session to an earlier tick group, or, with one group, as whole frames dropped here (in `dropped`).
Before it pops, an engine with several groups asks `later`: a frame not yet whole then waits for
the next group's turn instead of playing silence.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from liveplex.live.buckets import Buckets
from liveplex.live.playout import Adapt, Playout

_SCALE = np.float32(1.0 / 32768.0)
MAX_MARKS = 256
"""Arrival marks kept per session: a push each (20 ms chunks: 16 for the 4-frame cap). Past this
(tiny pushes), the oldest go and a frame's arrival reads later than it was: the policy then gives
back less, never more."""


class Jitter:
    """A FIFO of s16le caller samples sliced into frames on the engine's clock."""

    __slots__ = ("frame", "prebuffer", "max_frames", "playing", "underruns", "dropped", "earlier", "adapt", "waits",
                 "_stamps", "_buf", "_odd", "_cap_bytes", "_frame_bytes", "_silence", "_silent_pcm", "_base", "_marks")

    def __init__(self, frame: int, prebuffer: int, max_frames: int, playout: Playout | None = None,
                 waits: Buckets | None = None) -> None:
        if frame <= 0:
            raise ValueError(f"frame must be > 0 samples, got {frame}")
        if prebuffer <= 0:
            raise ValueError(f"prebuffer must be > 0 frames, got {prebuffer}")
        if prebuffer > max_frames:
            raise ValueError(f"prebuffer ({prebuffer}) must be <= max_frames ({max_frames})")
        self.frame = frame
        self.prebuffer = prebuffer
        self.max_frames = max_frames
        self.playing = False
        self.underruns = 0
        """Dry spells: transitions from playing to not playing."""
        self.dropped = 0
        """Samples dropped by the cap, and by the adaptive policy giving back delay."""
        self.earlier = 0
        """Set by each pop: tick-group steps the session should move earlier (adaptive only)."""
        self.adapt = None if playout is None else Adapt(playout)
        self.waits = waits
        """Where each played frame's wait is observed, seconds (the engine's `Pulse.caller_wait`)."""
        self._stamps = playout is not None or waits is not None
        """Arrivals are marked: a policy or a meter reads them."""
        self._base = 0
        """The stream position (bytes) of the buffer's first byte."""
        self._marks: deque[tuple[int, int]] = deque()
        """(stream position after a push, its arrival ns), oldest first, at most `MAX_MARKS`."""
        self._buf = bytearray()
        self._odd = b""
        self._cap_bytes = 2 * frame * max_frames
        self._frame_bytes = 2 * frame
        self._silence = np.zeros(frame, np.float32)
        self._silence.flags.writeable = False
        self._silent_pcm = bytes(2 * frame)

    def __len__(self) -> int:
        """Buffered samples."""
        return len(self._buf) >> 1

    @property
    def odd(self) -> bytes:
        """The byte carried over from a push of odd length (zero or one byte)."""
        return self._odd

    def push(self, data: bytes, at_ns: int | None = None) -> None:
        """Append caller bytes (that arrived at `at_ns`, if known); drop the oldest samples past the cap."""
        if self._odd:
            data = self._odd + data
        if len(data) & 1:
            self._odd = data[-1:]
            self._buf += memoryview(data)[:-1]
        else:
            self._odd = b""
            self._buf += data
        if at_ns is not None and self._stamps:
            marks = self._marks
            marks.append((self._base + len(self._buf), at_ns))
            if len(marks) > MAX_MARKS:
                marks.popleft()
        excess = len(self._buf) - self._cap_bytes
        if excess > 0:  # whole frames, so the frames played stay on the caller's frame grid
            excess = min(len(self._buf), -(-excess // self._frame_bytes) * self._frame_bytes)
            self._cut(excess)
            self.dropped += excess >> 1

    def _cut(self, n: int) -> None:
        """Remove the first `n` buffered bytes (n <= len)."""
        del self._buf[:n]
        self._base += n

    def later(self) -> bool:
        """This turn's frame is not whole yet and the policy would rather the session took the next
        tick group's turn for it than hear silence (`Adapt.later`); the engine moves it there."""
        return (self.adapt is not None and self.playing and len(self._buf) < self._frame_bytes
                and self.adapt.later())

    def regroup(self, groups: int) -> None:
        """The engine changed its tick groups (`Adapt.regroup`); a fixed buffer has no policy."""
        if self.adapt is not None:
            self.adapt.regroup(groups)

    def pop(self, due_ns: int | None = None) -> np.ndarray:
        """One frame as float32 in [-1, 1), or silence (an underrun keeps the partial frame).
        `due_ns`: when the tick that plays it was due (the adaptive policy's measure).

        The silent frame is a shared read-only array: callers must not write into it.
        """
        pcm = self._take(due_ns)
        if pcm is None:
            return self._silence
        out = np.frombuffer(pcm, "<i2").astype(np.float32)
        out *= _SCALE
        return out

    def pop_pcm(self, due_ns: int | None = None) -> bytes:
        """One frame as s16le bytes, or silence: `pop` without the float conversion.

        For engines that want the caller's PCM as it came (the sim echoes it), so no sample is
        touched; the same playout rules and counters as `pop`. `s16le(pop())` equals it.
        """
        pcm = self._take(due_ns)
        return self._silent_pcm if pcm is None else pcm

    def _take(self, due_ns: int | None) -> bytes | None:
        """The playout decision of live-contract §5.2: a frame's bytes, or None for silence."""
        need = self._frame_bytes
        buf = self._buf
        self.earlier = 0
        if len(buf) >= need * self.prebuffer:
            self.playing = True
        if not self.playing or len(buf) < need:
            if self.adapt is not None:
                if self.playing:
                    self.earlier = self.adapt.underrun()
                else:
                    self.adapt.dry()
            if self.playing:
                self.underruns += 1
            self.playing = False
            return None
        out = bytes(buf[:need])
        if self._stamps:
            arrived = self._arrival(self._base + need)
            wait = None if arrived is None or due_ns is None else due_ns - arrived
            if wait is not None and self.waits is not None:
                self.waits.observe(max(0, wait) / 1e9)
            if self.adapt is not None:
                self._adapt(wait)
        self._cut(need)
        return out

    def _arrival(self, end: int) -> int | None:
        """When the byte before stream position `end` arrived (None if no push said)."""
        marks = self._marks
        while marks and marks[0][0] < end:
            marks.popleft()
        return marks[0][1] if marks else None

    def _adapt(self, wait: int | None) -> None:
        """Tell the policy how long the frame being played waited; give back what it returns:
        whole frames dropped from the buffer (behind the one being played), the rest as `earlier`."""
        assert self.adapt is not None
        steps = self.adapt.played(wait)
        if not steps:
            return
        if self.adapt.policy.groups > 1:
            self.earlier = steps
            return
        whole = min(steps, len(self._buf) // self._frame_bytes - 1)
        if whole > 0:  # one group: no sooner turn, so whole periods go as frames dropped
            del self._buf[self._frame_bytes:self._frame_bytes * (whole + 1)]  # the played frame stays first
            self._base += self._frame_bytes * whole
            self.dropped += self.frame * whole

    def pending(self) -> bytes:
        """The buffered caller bytes, oldest first (a handover carries them)."""
        return bytes(self._buf)

    def restore(self, pending: bytes, odd: bytes, playing: bool, underruns: int, dropped: int) -> None:
        """Continue another engine's buffer (`pending`, `odd` and the counters it had)."""
        if len(pending) & 1 or len(odd) > 1 or len(pending) > self._cap_bytes:
            raise ValueError(f"a jitter state of {len(pending)} + {len(odd)} bytes does not fit this buffer")
        self._buf = bytearray(pending)
        self._odd = bytes(odd)
        self.playing = playing
        self.underruns = underruns
        self.dropped = dropped
        self._base = 0
        self._marks.clear()  # another pod's clock: the carried bytes' arrivals are unknown here

    def skip(self, frames: int) -> None:
        """Discard the caller audio of `frames` skipped ticks; not an underrun."""
        self._cut(min(len(self._buf), self._frame_bytes * frames))


def caller_buffer(frame: int, prebuffer_frames: int, jitter_frames: int, period_ns: int, tick_groups: int,
                  waits: Buckets | None = None) -> Jitter:
    """A session's buffer as an engine's settings ask: `prebuffer_frames` 0 (the default) is the
    adaptive one (playout at the first whole frame, `Playout` across `tick_groups`); N >= 1 a fixed
    prebuffer of N frames, as before issue 31 (kept for comparison: `bench latency`). Either
    observes its frames' waits into `waits` (the engine's `Pulse.caller_wait`) when given."""
    if prebuffer_frames == 0:
        return Jitter(frame, 1, jitter_frames, Playout(period_ns, tick_groups), waits)
    return Jitter(frame, prebuffer_frames, jitter_frames, None, waits)


def s16le(x: np.ndarray) -> bytes:
    """float32 samples back to s16le bytes; the inverse of `Jitter.pop`'s scaling (truncating)."""
    return np.clip(x * 32768.0, -32768, 32767).astype("<i2").tobytes()
