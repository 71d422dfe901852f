"""A bench caller's aiortc receiver, closer to a browser's: no fixed 80 ms before the first decode.

aiortc holds 4 packets (80 ms) of audio behind the one it decodes, a fixed delay; a browser's
receiver (NetEQ) adapts to the network and holds about a packet on loopback. The bench's WebRTC
callers hold none behind the next (`RECEIVE_PREFETCH`), so the round trip they hear is the
platform's, not aiortc's client: measured 60 ms less per call on a lone pod (docs/webrtc.md).
On the server's side of a call it changes nothing measurable (the pod's adaptive buffer times
the caller's frames), so the server keeps aiortc's default, which tolerates reordered packets.
"""

from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer

RECEIVE_PREFETCH = 0
JITTER_BUFFER = "_RTCRtpReceiver__jitter_buffer"
"""aiortc 1.16 keeps it private and fixed; the `webrtc` extra pins aiortc to 1.16."""
AUDIO_CAPACITY = 16
"""aiortc's own capacity for audio (packets)."""


def tune_receiver(pc: RTCPeerConnection) -> None:
    """Give the peer connection's audio receivers `RECEIVE_PREFETCH` (once the remote description
    made them, before any packet); raises if aiortc no longer has the buffer."""
    for transceiver in pc.getTransceivers():
        if transceiver.kind == "audio":
            receiver = transceiver.receiver
            if not hasattr(receiver, JITTER_BUFFER):
                raise RuntimeError(f"aiortc's RTCRtpReceiver has no {JITTER_BUFFER}: check RECEIVE_PREFETCH")
            setattr(receiver, JITTER_BUFFER, JitterBuffer(capacity=AUDIO_CAPACITY, prefetch=RECEIVE_PREFETCH))
