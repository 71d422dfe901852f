"""`SimEngine`: the echo under the real drive loop, with an emulated GPU cost curve.

live-contract §12.3. It runs on the engine thread like the PersonaPlex engine, so everything above
the model (drive, channel, front end, bench) is exercised for real without a GPU.
"""

from __future__ import annotations

import time

from liveplex.live import channel, contract, frames
from liveplex.live.drive import EngineError
from liveplex.live.jitter import Jitter, s16le
from liveplex.live.line import Line
from liveplex.sim_pod.echo import Echo
from liveplex.sim_pod.profile import SimProfile


class InjectedFault(EngineError):
    """Raised by the tick when `fail_after_ticks` is reached (fault injection)."""


class SimEngine:
    """A `Ticker` whose model is `Echo`; `Started` goes out at once (no prefill)."""

    def __init__(self, profile: SimProfile) -> None:
        self.profile = profile
        self._max_frames = profile.info().max_frames
        self._calls: list[tuple[Line, Echo]] = []
        self._ticks = 0

    def sessions(self) -> int:
        return len(self._calls)

    def take(self, sub: channel.LiveSubmission) -> None:
        p = self.profile
        line = Line.start(sub, Jitter(frames.FRAME_SAMPLES, p.prebuffer_frames, p.jitter_frames),
                          self._max_frames)
        if line is not None:
            self._calls.append((line, Echo(frames.FRAME_SAMPLES, p.echo_frames, p.word_frames)))

    def tick(self, skipped: int) -> None:
        live = []
        for line, echo in self._calls:  # 1. close ended sessions first
            reason = line.listen()
            if reason is None:
                live.append((line, echo))
            else:
                line.close(reason)
        self._ticks += 1
        if self.profile.fail_after_ticks and self._ticks > self.profile.fail_after_ticks:
            self._calls = live
            raise InjectedFault(f"injected fault after {self.profile.fail_after_ticks} ticks")
        cost_us = self.profile.cost_us(len(live))
        if cost_us:
            time.sleep(cost_us / 1e6)  # 2. "compute": the GIL is free for the front end meanwhile
        kept = []
        for line, echo in live:  # 3. one frame each
            out, word = echo.step(line.hear(skipped))
            if line.say(s16le(out), word):
                kept.append((line, echo))
        self._calls = kept  # 4. sinks gone: dropped silently

    def abort(self) -> None:
        for line, _ in self._calls:
            line.close(contract.CloseReason.ABORTED)
        self._calls = []
