"""A bench caller's aiortc receiver, closer to a browser's: no fixed 80 ms before the first decode.

aiortc holds 4 packets (80 ms) of audio behind the one it decodes, a fixed delay; a browser's
receiver (NetEQ) adapts to the network and holds about a packet on loopback. The bench's WebRTC
callers hold none behind the next (`RECEIVE_PREFETCH`: a packet is decoded when the one after it
arrives, 20 ms), so the round trip they hear is the platform's plus a browser's packet, not
aiortc's client. The server's side decodes each packet at once (`webrtc.receive.Prompt`).
"""

from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer

from liveplex.gptlive.server.webrtc import receive

RECEIVE_PREFETCH = 0
AUDIO_CAPACITY = 16
"""aiortc's own capacity for audio (packets)."""


def tune_receiver(pc: RTCPeerConnection) -> None:
    """Give the peer connection's audio receivers `RECEIVE_PREFETCH` (once the remote description
    made them, before any packet); raises if aiortc no longer has the buffer."""
    receive.install(pc, lambda: JitterBuffer(capacity=AUDIO_CAPACITY, prefetch=RECEIVE_PREFETCH))
