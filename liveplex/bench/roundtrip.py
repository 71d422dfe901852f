"""The echo round trip: caller frames stamped with their index, timed when the echo plays them back.

The primary socket carries no timestamps, so with `--echo-rtt` the caller writes a stamp over the
first three samples of every 80 ms frame of its stream: a magic word and the frame's index (uint32
little-endian). The sim echoes `audio/pcm` 24 kHz bytes untouched and frame-aligned (its jitter
buffer pops whole frames from the start of the stream), so an output delta that begins with a stamp
*is* that caller frame played back, and reading it costs decoding the delta's first 8 base64
characters (6 bytes), never the frame. A frame's send time is the send of the chunk that completes
it (with `--chunk-ms 20`, its fourth). Deltas without a stamp (silence before playout, a frame the
jitter cap's drop shifted off the frame grid) are not counted, nor is an index at or below one
already matched, nor one not sent yet. Pure: times are passed in.

The floor (`Floor`) is the ideal: a server that fed each frame to the model the moment it arrived
would send its echo back `echo_frames` E ticks later, E · 80 ms (480 ms with the sim's 6); what a
server adds above it is its own (issue 31: the buffer's prebuffer, the wait for a tick, pacing).
A fixed prebuffer of P frames adds P - 1 ticks at least, the wait for the shared tick up to one.
"""

from __future__ import annotations

import array
import base64
import binascii
import dataclasses
import struct
from collections.abc import Mapping

from liveplex.live import frames
from liveplex.sim_pod import profile

MAGIC = 0x5A3C
"""The stamp's first sample: tells a stamped frame from silence and from speech."""

_STAMP = struct.Struct("<HI")
"""Magic, then the frame index: 6 bytes, so exactly the first 8 base64 characters of a frame."""

STAMP_B64_CHARS = 8
"""Base64 characters of a delta that hold its stamp."""

FRAME_BYTES = frames.FRAME_BYTES
"""One 80 ms frame of 24 kHz s16le: the grid the stamps sit on."""


def stamp(chunk: bytes, start: int) -> bytes:
    """`chunk`, which sits at byte `start` of the caller's stream, with each frame that begins in
    it stamped. Chunks are whole 24 kHz ms (48-byte multiples), so a stamp never straddles two."""
    first = -(-start // FRAME_BYTES)
    pos = first * FRAME_BYTES - start
    if pos >= len(chunk):
        return chunk
    out = bytearray(chunk)
    while pos < len(out):
        _STAMP.pack_into(out, pos, MAGIC, first)
        first += 1
        pos += FRAME_BYTES
    return bytes(out)


def index(head: str) -> int | None:
    """The frame index stamped at the start of a delta whose base64 text begins with `head`
    (at least `STAMP_B64_CHARS` characters), or None when it carries no stamp."""
    try:
        raw = base64.b64decode(head[:STAMP_B64_CHARS], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != _STAMP.size:
        return None
    magic, n = _STAMP.unpack(raw)
    return n if magic == MAGIC else None


class RoundTrips:
    """One session's frame send times and the round trips of the frames heard back, in µs."""

    __slots__ = ("sent_ns", "rtt_us", "arrivals_ns", "skipped", "repeated", "silent", "_last", "_unstamped")

    def __init__(self) -> None:
        self.sent_ns = array.array("q")
        """Per frame of the caller's stream, in order: when the chunk completing it was sent."""
        self.rtt_us = array.array("q")
        """Per matched echo: arrival minus its frame's send time."""
        self.arrivals_ns = array.array("q")
        """When each output delta arrived, stamped or not: the gaps in the agent's audio."""
        self.skipped = 0
        """Frames never heard between two that were: lost on the way (a move that dropped audio)."""
        self.repeated = 0
        """Stamps heard again or out of order: duplicated or reordered frames."""
        self.silent = 0
        """Deltas without a stamp between two stamped ones: ticks the caller's frame missed."""
        self._last = -1
        self._unstamped = 0

    def sent(self, stream_end: int, now_ns: int) -> None:
        """The caller sent its stream up to byte `stream_end` at `now_ns`."""
        while (len(self.sent_ns) + 1) * FRAME_BYTES <= stream_end:
            self.sent_ns.append(now_ns)

    def heard(self, head: str, arrival_ns: int) -> None:
        """An output delta whose base64 text begins with `head` arrived at `arrival_ns`."""
        self.arrivals_ns.append(arrival_ns)
        n = index(head)
        if n is None or n >= len(self.sent_ns):
            self._unstamped += 1
            return
        if self._last >= 0 and n > self._last:
            self.silent += self._unstamped
        self._unstamped = 0
        if n <= self._last:
            self.repeated += 1
            return
        if self._last >= 0:
            self.skipped += n - self._last - 1
        self._last = n
        self.rtt_us.append((arrival_ns - self.sent_ns[n]) // 1000)


@dataclasses.dataclass(frozen=True, slots=True)
class Floor:
    """The least round trip a server's echo can take, and where its figures came from."""

    frames: int
    """Ticks the model holds a frame: echo (0 for a server that echoes at once)."""
    source: str

    @property
    def ms(self) -> float:
        return float(self.frames * frames.FRAME_MS)

    def as_dict(self) -> dict[str, object]:
        return {"ms": self.ms, "frames": self.frames, "source": self.source}


def floor_of(config: Mapping[str, object] | None) -> Floor:
    """The ideal of a server from its `/live/config`: the sim publishes `echo_frames`; a server
    that does not is taken at the sim's default, and one with no `/live/config` at all (the
    baseline) to echo each frame as soon as it is complete."""
    if config is None:
        return Floor(0, "no /live/config: echoes each frame once complete (the baseline)")
    published = "echo_frames" in config
    echo = int(config["echo_frames"]) if published else profile.SimProfile().echo_frames  # type: ignore[call-overload]
    where = "/live/config" if published else "sim default (/live/config does not publish it)"
    return Floor(echo, f"{where}: echo {echo} frames, each fed on arrival")
