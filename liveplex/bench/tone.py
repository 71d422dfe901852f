"""A microphone for WebRTC callers (aiortc): a sine, or silence until an onset, in 20 ms frames at
48 kHz, each returned when its last sample would have been captured, as a real microphone's.

What `scripts/bench_webrtc.py` and the tests' caller (`tests/support/webrtc.py`) say. `spoke_at`
is when the first loud sample was captured (monotonic): a round trip heard is measured from it,
so it counts the time the transport waits for a packet to fill, as a caller's does. Needs the
`webrtc` extra (aiortc, PyAV).
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

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._t0 is None:
            self._t0 = time.monotonic()
        start = self._t0 + self._n * PACKET_S
        wait = start + PACKET_S - time.monotonic()  # captured once its last sample is
        if wait > 0:
            await asyncio.sleep(wait)
        loud = self.hz > 0 and self.onset is not None and start >= self.onset
        if loud and self.spoke_at is None:
            self.spoke_at = start
        samples = (sine(self.hz, self._n * PACKET, PACKET, RATE, self.amplitude) if loud
                   else np.zeros(PACKET, "<i2"))
        frame = av.AudioFrame(format="s16", layout="mono", samples=PACKET)
        frame.planes[0].update(samples.tobytes())
        frame.sample_rate = RATE
        frame.time_base = fractions.Fraction(1, RATE)
        frame.pts = self._n * PACKET
        self._n += 1
        return frame
