"""A WebRTC call's audio: Opus at 48 kHz on the wire, 24 kHz PCM frames of 80 ms in the session.

Each direction is resampled once, here (PyAV's swresample): the caller's decoded Opus (48 kHz,
stereo, 20 ms) to 24 kHz mono, cut into the engine's 80 ms frames (`Heard`); the agent's 80 ms
frames to 48 kHz mono, cut into 20 ms frames and encoded here, one Opus packet each
(`AgentTrack`: aiortc's sender only packs what it returns; handing it frames cost a Python audio
level over every sample and a thread hop per packet, about a third of a call's CPU). Packet loss
is Opus's own concealment, in the decoder aiortc runs; the engine's jitter buffer takes the
caller's frames as it takes a socket's.
"""

from __future__ import annotations

import asyncio
import fractions
import time
from collections import deque

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from liveplex.live import frames

WIRE_RATE = 48_000
WIRE_SAMPLES = 960
"""One Opus packet: 20 ms at 48 kHz."""
WIRE_SECONDS = WIRE_SAMPLES / WIRE_RATE
WIRE_TIME_BASE = fractions.Fraction(1, WIRE_RATE)
TICK_PACKETS = 4
"""One engine frame's packets: what each tick brings at once."""
PLAYOUT_MAX_PACKETS = 2 * TICK_PACKETS
"""Agent audio waiting to be sent, at most (160 ms: two ticks' worth). More means the sender fell
behind the engine; the oldest are dropped, so the caller never hears the agent later than this
behind its tick. A (re)start of the pacing keeps only the newest tick's worth: before ICE
completes nothing is read, and what queued meanwhile would otherwise delay the whole call."""
LATE_S = 0.1
"""A packet this late is sent at once and the pacing starts over from it (after a gap)."""


def _pcm(frame: av.AudioFrame) -> bytes:
    """The s16 samples of a packed mono frame (its plane may be padded)."""
    return bytes(frame.planes[0])[: frame.samples * 2]


class Heard:
    """The caller's decoded RTP audio -> whole engine frames (80 ms of 24 kHz s16le)."""

    def __init__(self) -> None:
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=frames.SAMPLE_RATE)
        self._pending = bytearray()

    def feed(self, frame: av.AudioFrame) -> list[bytes]:
        """The engine frames completed by `frame` (none, usually one in four)."""
        for out in self._resampler.resample(frame):
            self._pending += _pcm(out)
        done: list[bytes] = []
        size = frames.FRAME_BYTES
        while len(self._pending) >= size:
            done.append(bytes(self._pending[:size]))
            del self._pending[:size]
        return done


OPUS_BIT_RATE = 48_000
"""The agent's voice, mono: what WebRTC's own Opus senders use for speech."""


def _encoder() -> av.AudioCodecContext:
    codec = av.Codec("libopus", "w").create("audio")
    codec.sample_rate = WIRE_RATE
    codec.layout = "mono"
    codec.format = "s16"
    codec.bit_rate = OPUS_BIT_RATE
    codec.time_base = WIRE_TIME_BASE
    codec.options = {"application": "voip"}
    return codec


class AgentTrack(MediaStreamTrack):
    """The agent's audio as an aiortc track: engine frames in (`play`), one Opus packet per 20 ms
    out, paced at real time (aiortc's sender sends what `recv` returns at once)."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=WIRE_RATE)
        self._encoder = _encoder()
        self._pending = bytearray()
        self._queue: deque[bytes] = deque()
        self._ready = asyncio.Event()
        self._pts = 0
        self._sent = 0
        self._t0 = 0.0
        self.dropped = 0
        """Packets dropped because the sender fell behind (`PLAYOUT_MAX_PACKETS`)."""

    def play(self, pcm: bytes) -> None:
        """One engine frame of the agent's audio (24 kHz s16le mono)."""
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.planes[0].update(pcm)
        frame.sample_rate = frames.SAMPLE_RATE
        for out in self._resampler.resample(frame):
            self._pending += _pcm(out)
        size = WIRE_SAMPLES * 2
        while len(self._pending) >= size:
            self._queue.append(bytes(self._pending[:size]))
            del self._pending[:size]
        while len(self._queue) > PLAYOUT_MAX_PACKETS:
            self._queue.popleft()
            self.dropped += 1
        if self._queue:
            self._ready.set()

    async def recv(self) -> av.Packet:
        while True:
            frame = await self._next()
            for packet in self._encoder.encode(frame):  # one per frame (libopus holds none back)
                packet.pts = frame.pts
                packet.time_base = WIRE_TIME_BASE
                return packet

    async def _next(self) -> av.AudioFrame:
        """The next 20 ms of the agent, when it is due."""
        while not self._queue:
            if self.readyState != "live":
                raise MediaStreamError
            self._ready.clear()
            await self._ready.wait()
        if self.readyState != "live":
            raise MediaStreamError
        now = time.monotonic()
        due = self._t0 + self._sent * WIRE_SECONDS
        if self._sent == 0 or now - due > LATE_S:
            self._t0, self._sent, due = now, 0, now
            while len(self._queue) > TICK_PACKETS:
                self._queue.popleft()
                self.dropped += 1
        elif due > now:
            await asyncio.sleep(due - now)
        self._sent += 1
        frame = av.AudioFrame(format="s16", layout="mono", samples=WIRE_SAMPLES)
        frame.planes[0].update(self._queue.popleft() if self._queue else bytes(WIRE_SAMPLES * 2))
        frame.sample_rate = WIRE_RATE
        frame.time_base = WIRE_TIME_BASE
        frame.pts = self._pts
        self._pts += WIRE_SAMPLES
        return frame

    def stop(self) -> None:
        super().stop()
        self._ready.set()
