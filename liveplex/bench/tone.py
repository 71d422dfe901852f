"""A microphone for WebRTC callers (aiortc): a sine, or silence until an onset, in 20 ms frames at
48 kHz, each returned when its last sample would have been captured, as a real microphone's.

What `scripts/bench_webrtc.py` and the tests' caller (`tests/support/webrtc.py`) say. `spoke_at`
is when the first loud sample was captured (monotonic): a round trip heard is measured from it,
so it counts the time the transport waits for a packet to fill, as a caller's does. `voice` and
`opus_packets`: a voiced signal as a browser's Opus sender packs it, for the decoder's tests and
`scripts/bench_opus_decode.py`. Needs the `webrtc` extra (aiortc, PyAV).
"""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

RATE = 48_000
PACKET = 960
"""One frame: 20 ms at 48 kHz, what a browser's Opus sender packs."""
PACKET_S = PACKET / RATE


def sine(hz: float, first: int, count: int, rate: int, amplitude: int = 8000) -> np.ndarray:
    """`count` s16 samples of a sine of `hz` from sample `first` on (phase-continuous across calls)."""
    t = (np.arange(count) + first) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype("<i2")


def voice(seconds: float = 2.0) -> np.ndarray:
    """A voiced, slowly swelling 48 kHz signal (220 Hz and its octave): what Opus's SILK layer
    codes, and its FEC carries."""
    t = np.arange(int(RATE * seconds)) / RATE
    pitch = 6000 * np.sin(2 * np.pi * 220 * t) + 3000 * np.sin(2 * np.pi * 440 * t)
    return (pitch * (1 + 0.3 * np.sin(2 * np.pi * 2 * t))).astype(np.int16)


def opus_packets(samples: np.ndarray, bit_rate: int = 32_000, loss_percent: int = 20) -> list[bytes]:
    """`samples` (48 kHz s16 mono) as 20 ms Opus packets, with in-band FEC as Chrome sends it
    (`useinbandfec=1`: the encoder adds the LBRR copy of each frame to the next packet, at the
    bit rate `loss_percent` asks for); a tail short of a packet is left out."""
    codec = av.CodecContext.create("libopus", "w")
    assert isinstance(codec, av.AudioCodecContext)
    codec.sample_rate = RATE
    codec.layout = "mono"
    codec.format = "s16"
    codec.bit_rate = bit_rate
    codec.time_base = fractions.Fraction(1, RATE)
    codec.options = {"application": "voip", "fec": "1", "packet_loss": str(loss_percent)}
    packets: list[bytes] = []
    for n in range(len(samples) // PACKET):
        frame = av.AudioFrame(format="s16", layout="mono", samples=PACKET)
        frame.planes[0].update(samples[n * PACKET:(n + 1) * PACKET].astype("<i2").tobytes())
        frame.sample_rate = RATE
        frame.time_base = fractions.Fraction(1, RATE)
        frame.pts = n * PACKET
        packets += [bytes(packet) for packet in codec.encode(frame)]
    return packets


class ToneTrack(MediaStreamTrack):
    """A sine of `hz` (0: silence), from `onset` (monotonic; None: from the first frame, or set
    later) on, silence before; paced at real time from the first `recv`."""

    kind = "audio"

    def __init__(self, hz: float, amplitude: int = 8000, onset: float | None = 0.0) -> None:
        super().__init__()
        self.hz = hz
        self.amplitude = amplitude
        self.onset = onset
        self.spoke_at: float | None = None
        """When the first loud sample was captured (monotonic)."""
        self._n = 0
        self._t0: float | None = None

    def packet(self, n: int) -> np.ndarray | None:
        """Packet `n` past the onset (`PACKET` s16 samples), None for silence: the sine here; a
        subclass plays something else."""
        return sine(self.hz, n * PACKET, PACKET, RATE, self.amplitude) if self.hz > 0 else None

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._t0 is None:
            self._t0 = time.monotonic()
        start = self._t0 + self._n * PACKET_S
        wait = start + PACKET_S - time.monotonic()  # captured once its last sample is
        if wait > 0:
            await asyncio.sleep(wait)
        loud = self.packet(self._n) if self.onset is not None and start >= self.onset else None
        if loud is not None and self.spoke_at is None:
            self.spoke_at = start
        samples = np.zeros(PACKET, "<i2") if loud is None else loud
        frame = av.AudioFrame(format="s16", layout="mono", samples=PACKET)
        frame.planes[0].update(samples.tobytes())
        frame.sample_rate = RATE
        frame.time_base = fractions.Fraction(1, RATE)
        frame.pts = self._n * PACKET
        self._n += 1
        return frame
