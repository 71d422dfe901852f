"""The caller's RTP audio decoded as it arrives: `Prompt`, in place of aiortc's buffer and decoder.

aiortc's audio receiver reassembles frames in a `JitterBuffer` that emits a packet only once it has
seen the next 4 (`prefetch=4`, fixed): 80 ms added to every frame the caller says, before the
pod's own adaptive buffer (docs/live.md) even sees it; and its decoder (PyAV's) cannot be told a
packet was lost, so a loss was 20 ms of silence. An Opus packet is one whole frame (RFC 7587), so
nothing needs reassembling: `Prompt` takes each packet from aiortc's receiver as it arrives and
hands it to the call's own decoder (`media.Heard`: libopus with Opus's concealment) on the decode
thread, off the event loop as aiortc's decoder thread was; whole engine frames come back to the
loop in `Prompt.frames`. aiortc's decoder is handed nothing (its thread idles). What the pod's
buffer is for (jitter, late frames) it still does, measured from each frame's arrival.

aiortc 1.16 keeps the buffer private (`RECEIVER_BUFFER`), and the `webrtc` extra pins it;
`install` raises if it moves. It is the only private part touched: the decoder is not aiortc's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtp import RtpPacket

logger = logging.getLogger(__name__)

RECEIVER_BUFFER = "_RTCRtpReceiver__jitter_buffer"
"""Where aiortc's `RTCRtpReceiver` keeps its buffer (name-mangled private)."""

_DECODING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webrtc-decode")
"""Every call's decoding, in order, off the event loop: one thread (started by the first packet)
whatever the number of calls. A packet's decode is tens of microseconds with the GIL released
(docs/webrtc.md, "Measured"); a thread per call, as aiortc has, would buy nothing."""


class ReceiveBuffer(Protocol):
    """What aiortc's receiver asks of its buffer: a packet in, (ask for a key frame, a frame to
    decode or None) out."""

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]: ...


class Prompt:
    """Each audio packet to `decode` (`media.Heard.packet`: payload, sequence number, timestamp
    -> whole engine frames) on the decode thread as it arrives; the frames, in order, in `frames`
    on the loop, then None if decoding failed (see the module docstring)."""

    def __init__(self, decode: Callable[[bytes, int, int], list[bytes]]) -> None:
        self._decode = decode
        self._loop = asyncio.get_running_loop()
        self.frames: asyncio.Queue[bytes | None] = asyncio.Queue()
        """Filled as fast as the caller's packets arrive, read as fast by the call."""
        self.closed = False

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        if not self.closed:
            _DECODING.submit(self._run, packet.payload, packet.sequence_number, packet.timestamp)
        return False, None

    def close(self) -> None:
        """Take no more packets (the call ended, or it has another audio receiver)."""
        self.closed = True

    def _run(self, payload: bytes, seq: int, ts: int) -> None:
        """On the decode thread."""
        if self.closed:
            return
        try:
            done: list[bytes | None] = list(self._decode(payload, seq, ts))
        except Exception:  # a bug, not the caller's bytes (libopus refusals are concealed)
            logger.error("webrtc caller audio could not be decoded", exc_info=True)
            self.closed = True
            done = [None]
        if done:
            self._loop.call_soon_threadsafe(self._deliver, done)

    def _deliver(self, done: list[bytes | None]) -> None:
        for frame in done:
            self.frames.put_nowait(frame)


B = TypeVar("B", bound=ReceiveBuffer)


def install(pc: RTCPeerConnection, buffer: Callable[[], B]) -> list[B]:
    """Give each audio receiver of `pc` a new `buffer()` (once a remote description made them,
    before any packet arrived), in order; raises if aiortc no longer keeps its buffer there."""
    installed: list[B] = []
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "audio":
            receiver = transceiver.receiver
            if not hasattr(receiver, RECEIVER_BUFFER):
                raise RuntimeError(f"aiortc's RTCRtpReceiver has no {RECEIVER_BUFFER}: see webrtc/receive.py")
            installed.append(buffer())
            setattr(receiver, RECEIVER_BUFFER, installed[-1])
    return installed
