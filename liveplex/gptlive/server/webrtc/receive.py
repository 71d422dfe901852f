"""The caller's RTP audio into the decoder as it arrives: `Prompt`, in place of aiortc's buffer.

aiortc's audio receiver reassembles frames in a `JitterBuffer` that emits a packet only once it has
seen the next 4 (`prefetch=4`, fixed): 80 ms added to every frame the caller says, before the
pod's own adaptive buffer (docs/live.md) even sees it. An Opus packet is one whole frame (RFC
7587), so nothing needs reassembling: `Prompt` hands each packet to the decoder when it arrives,
in sequence order. What the pod's buffer is for (jitter, late frames) it still does, measured
from each frame's arrival. A packet older than one already decoded is dropped, as a lost one:
its moment passed (aiortc's buffer would hold every packet 80 ms to wait for it). Measured in
docs/webrtc.md ("The round trip").

aiortc 1.16 keeps the buffer private (`RECEIVER_BUFFER`), and the `webrtc` extra pins it;
`install` raises if it moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtp import RtpPacket

RECEIVER_BUFFER = "_RTCRtpReceiver__jitter_buffer"
"""Where aiortc's `RTCRtpReceiver` keeps its buffer (name-mangled private)."""
RESTART_PACKETS = 100
"""A packet this far behind the next expected one is a sender that started over (aiortc's
`MAX_MISORDER`), not a late packet."""
_SEQ = 1 << 16


class ReceiveBuffer(Protocol):
    """What aiortc's receiver asks of its buffer: a packet in, (ask for a key frame, a frame to
    decode or None) out."""

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]: ...


class Prompt:
    """Each audio packet to the decoder at once, in sequence order (see the module docstring)."""

    def __init__(self) -> None:
        self._next: int | None = None
        """The sequence number after the last one decoded."""

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        seq = packet.sequence_number
        behind = 0 if self._next is None else (self._next - seq) % _SEQ  # ahead of next: near 2**16
        if 0 < behind <= RESTART_PACKETS:  # reordered or duplicated: its moment passed
            return False, None
        self._next = (seq + 1) % _SEQ
        # An Opus (or G.711) payload is what the decoder takes: aiortc's depayload is the identity.
        return False, JitterFrame(data=packet.payload, timestamp=packet.timestamp)


def install(pc: RTCPeerConnection, buffer: Callable[[], ReceiveBuffer]) -> None:
    """Give each audio receiver of `pc` a new `buffer()` (once a remote description made them,
    before any packet arrived); raises if aiortc no longer keeps its buffer there."""
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "audio":
            receiver = transceiver.receiver
            if not hasattr(receiver, RECEIVER_BUFFER):
                raise RuntimeError(f"aiortc's RTCRtpReceiver has no {RECEIVER_BUFFER}: see webrtc/receive.py")
            setattr(receiver, RECEIVER_BUFFER, buffer())
