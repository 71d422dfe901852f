"""A WebRTC call's audio: Opus at 48 kHz on the wire, 24 kHz PCM frames of 80 ms in the session.

Each direction is resampled once. The caller's packets are decoded by libopus straight to 24 kHz
mono (`opus.Decoder`: its synthesis cuts the band, no resampler follows), with Opus's own
concealment in place of lost packets (`timeline.Timeline` says what fills each gap), and cut into
the engine's 80 ms frames (`Heard`, on the decode thread: `receive.Prompt`). The agent's 80 ms
frames are resampled to 48 kHz mono (PyAV's swresample), cut into 20 ms frames and encoded here,
one Opus packet each (`AgentTrack`: aiortc's sender only packs what it returns; handing it frames
cost a Python audio level over every sample and a thread hop per packet, about a third of a call's
CPU). The engine's jitter buffer takes the caller's frames as it takes a socket's.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import time
from collections import deque

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from liveplex.gptlive.server.webrtc import opus, timeline
from liveplex.live import frames

logger = logging.getLogger(__name__)

WIRE_RATE = timeline.TICKS_PER_S
WIRE_SAMPLES = 960
"""One Opus packet: 20 ms at 48 kHz."""
WIRE_SECONDS = WIRE_SAMPLES / WIRE_RATE
WIRE_TIME_BASE = fractions.Fraction(1, WIRE_RATE)
TICK_PACKETS = 4
"""One engine frame's packets: what each tick brings at once."""
PLAYOUT_MAX_PACKETS = 2 * TICK_PACKETS
"""Agent audio waiting to be sent, at most (160 ms: two ticks' worth). More means the sender fell
behind the engine; the oldest are dropped, so the caller never hears the agent later than this
behind its tick."""
LATE_S = 0.1
"""A packet due this long ago is dropped while a tick's worth is queued behind it: the sender
stalled (or, before ICE completed, never read), and what queued meanwhile would otherwise delay
the rest of the call."""


def _pcm(frame: av.AudioFrame) -> bytes:
    """The s16 samples of a packed mono frame (its plane may be padded)."""
    return bytes(frame.planes[0])[: frame.samples * 2]


class Resampler:
    """swresample to s16 mono at `rate`, with its filter's delay paid once, in front.

    Its first output is short by that delay (32 samples at 48 kHz) and every later one whole; cut
    into 20 ms packets as it comes, each packet would then straddle two inputs and every agent
    frame's last 20 ms wait for the next tick (measured). The first output is padded with the
    missing silence in front, so each input gives exactly its own share."""

    def __init__(self, rate: int) -> None:
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        self._rate = rate
        self._started = False

    def pcm(self, frame: av.AudioFrame) -> bytes:
        """`frame` resampled, s16le."""
        out = b"".join(_pcm(part) for part in self._resampler.resample(frame))
        if not self._started:
            self._started = True
            share = frame.samples * self._rate // frame.sample_rate * 2
            out = bytes(max(0, share - len(out))) + out
        return out


class Heard:
    """The caller's Opus packets -> whole engine frames (80 ms of 24 kHz s16le), on the caller's
    timeline: lost packets concealed by Opus, pauses filled with silence (`timeline`), so the
    frames after a gap keep their time. Runs on the decode thread (`receive.Prompt`)."""

    def __init__(self) -> None:
        self._decoder = opus.Decoder(frames.SAMPLE_RATE)
        self._timeline = timeline.Timeline()
        self._pending = bytearray()
        self.unreadable = 0
        """Packets libopus refused: each is concealed as if lost."""

    def packet(self, payload: bytes, seq: int, ts: int) -> list[bytes]:
        """The engine frames completed by RTP packet `seq` at time `ts` (none, usually one in four)."""
        try:
            ticks = opus.packet_ticks(payload)
        except opus.OpusError:  # not on the timeline: the next packet conceals it as a lost one
            self._refused()
            return []
        fill = self._timeline.place(seq, ts, ticks)
        if fill is None:
            return []
        if fill.conceal:
            try:
                self._pending += self._decoder.conceal(self._samples(fill.conceal), payload)
            except opus.OpusError:  # its FEC unreadable: PLC alone
                self._pending += self._decoder.conceal(self._samples(fill.conceal))
        self._pending += bytes(self._samples(fill.silence) * 2)
        try:
            self._pending += self._decoder.decode(payload)
        except opus.OpusError:
            self._refused()
            self._pending += self._decoder.conceal(self._samples(ticks))
        done: list[bytes] = []
        size = frames.FRAME_BYTES
        while len(self._pending) >= size:
            done.append(bytes(self._pending[:size]))
            del self._pending[:size]
        return done

    def _samples(self, ticks: int) -> int:
        return ticks * self._decoder.rate // timeline.TICKS_PER_S

    def _refused(self) -> None:
        if not self.unreadable:
            logger.warning("webrtc caller sent a packet libopus cannot read; concealed as lost")
        self.unreadable += 1


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


class Outbox:
    """The agent's 20 ms packets waiting for the wire, each due when its tick's audio arrived
    plus its place in the tick (0, 20, 40, 60 ms). Each tick is paced from its own arrival, not
    from a clock started with the call: when the pod moves the session to an earlier tick group
    (its adaptive buffer, docs/live.md) or a tick comes early, its audio leaves at once instead
    of waiting for a schedule set by earlier ticks (measured: 20-60 ms held that way)."""

    def __init__(self) -> None:
        self._queue: deque[tuple[float, bytes]] = deque()
        self.dropped = 0
        """Packets dropped because the sender fell behind (`PLAYOUT_MAX_PACKETS`, `LATE_S`)."""

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, packets: list[bytes], now: float) -> None:
        """One tick's packets, arrived at `now` (monotonic seconds)."""
        self._queue.extend((now + i * WIRE_SECONDS, packet) for i, packet in enumerate(packets))
        while len(self._queue) > PLAYOUT_MAX_PACKETS:
            self._queue.popleft()
            self.dropped += 1

    def take(self, now: float) -> tuple[float, bytes]:
        """The next packet and when it is due; those stale at `now` are dropped first (`LATE_S`).
        The outbox must not be empty."""
        while len(self._queue) > TICK_PACKETS and self._queue[0][0] < now - LATE_S:
            self._queue.popleft()
            self.dropped += 1
        return self._queue.popleft()


class AgentTrack(MediaStreamTrack):
    """The agent's audio as an aiortc track: engine frames in (`play`), one Opus packet per 20 ms
    out, each when its `Outbox` says (aiortc's sender sends what `recv` returns at once)."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._resampler = Resampler(WIRE_RATE)
        self._encoder = _encoder()
        self._pending = bytearray()
        self.outbox = Outbox()
        self._ready = asyncio.Event()
        self._pts = 0

    def play(self, pcm: bytes) -> None:
        """One engine frame of the agent's audio (24 kHz s16le mono)."""
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.planes[0].update(pcm)
        frame.sample_rate = frames.SAMPLE_RATE
        self._pending += self._resampler.pcm(frame)
        size = WIRE_SAMPLES * 2
        whole = len(self._pending) // size * size
        packets = [bytes(self._pending[i:i + size]) for i in range(0, whole, size)]
        del self._pending[:whole]
        if packets:
            self.outbox.add(packets, time.monotonic())
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
        while not self.outbox:
            if self.readyState != "live":
                raise MediaStreamError
            self._ready.clear()
            await self._ready.wait()
        if self.readyState != "live":
            raise MediaStreamError
        now = time.monotonic()
        due, pcm = self.outbox.take(now)
        if due > now:
            await asyncio.sleep(due - now)
        frame = av.AudioFrame(format="s16", layout="mono", samples=WIRE_SAMPLES)
        frame.planes[0].update(pcm)
        frame.sample_rate = WIRE_RATE
        frame.time_base = WIRE_TIME_BASE
        frame.pts = self._pts
        self._pts += WIRE_SAMPLES
        return frame

    def stop(self) -> None:
        super().stop()
        self._ready.set()
