"""An aiortc caller for WebRTC tests: a tone as its microphone, what it hears kept as 48 kHz
samples, and the `oai-events` data channel as a queue of decoded events. It makes the offer a
browser would (audio sendrecv, the channel opened before the offer); it may lose every Nth RTP
packet it sends (`lose_every`), as a lossy link would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtp import is_rtcp

from liveplex.bench import audio as recordings
from liveplex.bench.tone import PACKET, RATE, ToneTrack
from liveplex.gptlive.server.webrtc import opus

SEND_RTP = "_send_rtp"
"""What aiortc 1.16's `RTCDtlsTransport` calls with each plain RTP/RTCP packet it protects and sends."""


def has_fec(packet: bytes) -> bool:
    """Whether `packet` carries the FEC (LBRR) of the one before it."""
    return opus.library().opus_packet_has_lbrr(packet, len(packet)) == 1


def _lossy(send: Callable[[bytes], Awaitable[None]], every: int) -> Callable[[bytes], Awaitable[None]]:
    """`send`, losing every `every`th RTP packet (RTCP all kept)."""
    count = 0

    async def sent(data: bytes) -> None:
        nonlocal count
        if not is_rtcp(data):
            count += 1
            if count % every == 0:
                return
        await send(data)

    return sent


def power_at(samples: np.ndarray, hz: float, rate: int = RATE) -> float:
    """The share of the signal's energy within 20 Hz of `hz` (1.0: a pure tone there)."""
    if len(samples) < rate // 10:
        return 0.0
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(samples), 1 / rate)
    total = spectrum[freqs > 50].sum()
    return float(spectrum[np.abs(freqs - hz) < 20].sum() / total) if total else 0.0


class Voice(ToneTrack):
    """The shipped recording of a caller as a microphone: silent until `speak`, then that much of
    the recording (where the last `speak` left off), then silent again: speech a detector hears."""

    def __init__(self) -> None:
        super().__init__(0.0, onset=None)
        self._speech = recordings.read_wav(recordings.recording_path(), RATE)
        self._at = 0
        self._left = 0

    def speak(self, seconds: float) -> None:
        self._left = round(seconds * RATE) // PACKET
        self.onset = time.monotonic()

    def packet(self, n: int) -> np.ndarray | None:
        if self._left <= 0:
            return None
        self._left -= 1
        self._at = self._at % (len(self._speech) - PACKET) + PACKET
        return self._speech[self._at - PACKET:self._at]


class Caller:
    """One browser-like WebRTC caller; `track`: its microphone (a tone of `hz` by default)."""

    def __init__(self, hz: float = 440.0, channel: bool = True, audio: bool = True,
                 ice: RTCConfiguration | None = None, lose_every: int = 0,
                 track: MediaStreamTrack | None = None) -> None:
        self.pc = RTCPeerConnection(ice or RTCConfiguration(iceServers=[]))
        self.lose_every = lose_every
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.heard: list[np.ndarray] = []
        self.arrivals: list[float] = []
        """When each heard frame arrived (monotonic): the gaps a caller hears."""
        self.opened = asyncio.Event()
        self.closed = asyncio.Event()
        self._listening: asyncio.Task[None] | None = None
        self.channel = self.pc.createDataChannel("oai-events") if channel else None
        if self.channel is not None:
            self.channel.on("open", self.opened.set)
            self.channel.on("message", lambda text: self.events.put_nowait(json.loads(text)))
            self.channel.on("close", self.closed.set)
        if audio:
            self.pc.addTransceiver(track or ToneTrack(hz), direction="sendrecv")
        self.pc.on("track", self._track)

    def _track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self._listening = asyncio.get_running_loop().create_task(self._listen(track))

    async def _listen(self, track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                self.arrivals.append(time.monotonic())
                self.heard.append(frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0].copy())

    def longest_gap_s(self, since: float = 0.0) -> float:
        """The longest time between two heard frames after `since` (monotonic)."""
        stamps = [t for t in self.arrivals if t >= since]
        return max((b - a for a, b in zip(stamps, stamps[1:])), default=0.0)

    def samples(self, last_s: float | None = None) -> np.ndarray:
        """What the caller heard so far (the first channel), or its last `last_s` seconds."""
        heard = np.concatenate(self.heard) if self.heard else np.zeros(0, np.int16)
        return heard if last_s is None else heard[-int(last_s * RATE):]

    async def offer(self) -> str:
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return self.pc.localDescription.sdp

    async def accept(self, sdp: str) -> None:
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp, "answer"))
        if self.lose_every:  # the answer bundled the call on its transport: lose there
            transport = self.pc.getSenders()[0].transport
            if not callable(getattr(transport, SEND_RTP, None)):
                raise RuntimeError(f"aiortc's RTCDtlsTransport has no {SEND_RTP}: see tests/support/webrtc.py")
            setattr(transport, SEND_RTP, _lossy(getattr(transport, SEND_RTP), self.lose_every))

    def send(self, event: dict[str, Any]) -> None:
        assert self.channel is not None
        self.channel.send(json.dumps(event))

    async def until(self, kind: str, timeout_s: float = 10.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The next event of type `kind`, and every event before it."""
        before: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout_s):
            while True:
                event = await self.events.get()
                if event["type"] == kind:
                    return event, before
                before.append(event)

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
        await self.pc.close()
