"""The per-session jitter buffer: caller audio in chunks of any size out as whole 80 ms frames.

live-contract §5. Samples are kept as raw s16le bytes in a `bytearray` (appending and trimming
the front are memmoves, far cheaper than per-sample work); a trailing odd byte is carried to the
next push so any byte split of the same stream yields the same samples. Playout starts once
`prebuffer` frames are buffered; running dry while playing counts one underrun and waits for the
prebuffer again; past `max_frames` the oldest samples are dropped.
"""

from __future__ import annotations

import numpy as np

_SCALE = np.float32(1.0 / 32768.0)


class Jitter:
    """A FIFO of s16le caller samples sliced into frames on the engine's clock."""

    __slots__ = ("frame", "prebuffer", "max_frames", "playing", "underruns", "dropped",
                 "_buf", "_odd", "_cap_bytes", "_frame_bytes", "_silence", "_silent_pcm")

    def __init__(self, frame: int, prebuffer: int, max_frames: int) -> None:
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
        """Samples dropped by the cap."""
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

    def push(self, data: bytes) -> None:
        """Append caller bytes; drop the oldest samples past the cap."""
        if self._odd:
            data = self._odd + data
        if len(data) & 1:
            self._odd = data[-1:]
            self._buf += memoryview(data)[:-1]
        else:
            self._odd = b""
            self._buf += data
        excess = len(self._buf) - self._cap_bytes
        if excess > 0:
            del self._buf[:excess]
            self.dropped += excess >> 1

    def pop(self) -> np.ndarray:
        """One frame as float32 in [-1, 1), or silence (an underrun keeps the partial frame).

        The silent frame is a shared read-only array: callers must not write into it.
        """
        pcm = self._take()
        if pcm is None:
            return self._silence
        out = np.frombuffer(pcm, "<i2").astype(np.float32)
        out *= _SCALE
        return out

    def pop_pcm(self) -> bytes:
        """One frame as s16le bytes, or silence: `pop` without the float conversion.

        For engines that want the caller's PCM as it came (the sim echoes it), so no sample is
        touched; the same playout rules and counters as `pop`. `s16le(pop())` equals it.
        """
        pcm = self._take()
        return self._silent_pcm if pcm is None else pcm

    def _take(self) -> bytes | None:
        """The playout decision of live-contract §5.2: a frame's bytes, or None for silence."""
        need = self._frame_bytes
        buf = self._buf
        if len(buf) >= need * self.prebuffer:
            self.playing = True
        if not self.playing or len(buf) < need:
            if self.playing:
                self.underruns += 1
            self.playing = False
            return None
        out = bytes(buf[:need])
        del buf[:need]
        return out

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

    def skip(self, frames: int) -> None:
        """Discard the caller audio of `frames` skipped ticks; not an underrun."""
        del self._buf[: 2 * self.frame * frames]


def s16le(x: np.ndarray) -> bytes:
    """float32 samples back to s16le bytes; the inverse of `Jitter.pop`'s scaling (truncating)."""
    return np.clip(x * 32768.0, -32768, 32767).astype("<i2").tobytes()
