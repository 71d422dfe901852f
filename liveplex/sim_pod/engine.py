"""`SimEngine`: the echo under the real drive loop, with an emulated GPU cost curve.

live-contract §12.3. It runs on the engine thread like the PersonaPlex engine, so everything above
the model (drive, channel, front end, bench) is exercised for real without a GPU. The tick holds
the GIL while the front end waits for it, so it is kept short: caller PCM is echoed as bytes and
loudness is judged for all sessions in one numpy pass (a few µs per session, docs/bench.md).
"""

from __future__ import annotations

import time

import numpy as np

from liveplex.live import channel, contract, frames
from liveplex.live.drive import EngineError
from liveplex.live.jitter import Jitter
from liveplex.live.line import Line
from liveplex.sim_pod import echo
from liveplex.sim_pod.profile import SimProfile


class InjectedFault(EngineError):
    """Raised by the tick when `fail_after_ticks` is reached (fault injection)."""


class SimEngine:
    """A `Ticker` whose model is `Echo`; `Started` goes out at once (no prefill)."""

    def __init__(self, profile: SimProfile) -> None:
        self.profile = profile
        self._max_frames = profile.info().max_frames
        self._calls: list[tuple[Line, echo.Echo]] = []
        self._ticks = 0

    def sessions(self) -> int:
        return len(self._calls)

    def take(self, sub: channel.LiveSubmission) -> None:
        p = self.profile
        line = Line.start(sub, Jitter(frames.FRAME_SAMPLES, p.prebuffer_frames, p.jitter_frames),
                          self._max_frames)
        if line is not None:
            self._calls.append((line, echo.Echo(frames.FRAME_SAMPLES, p.echo_frames,
                                                p.word_frames)))

    def tick(self, skipped: int) -> None:
        live = []
        for call in self._calls:  # 1. close ended sessions first
            line = call[0]
            reason = line.listen()
            if reason is None:
                live.append(call)
            else:
                line.close(reason)
        self._ticks += 1
        if self.profile.fail_after_ticks and self._ticks > self.profile.fail_after_ticks:
            self._calls = live
            raise InjectedFault(f"injected fault after {self.profile.fail_after_ticks} ticks")
        cost_us = self.profile.cost_us(len(live))
        if cost_us:
            time.sleep(cost_us / 1e6)  # 2. "compute": the GIL is free for the front end meanwhile
        heard = [line.hear_pcm(skipped) for line, _ in live]  # 3. one frame each
        loud = echo.loud_rows(np.frombuffer(b"".join(heard), "<i2").reshape(len(heard),
                                                                    frames.FRAME_SAMPLES))
        kept = []
        for call, pcm, is_loud in zip(live, heard, loud.tolist(), strict=True):
            for text in call[0].commentary():
                call[1].say(text)
            out, word = call[1].step(pcm, is_loud)
            if call[0].say(out, word):
                kept.append(call)
        self._calls = kept  # 4. sinks gone: dropped silently

    def abort(self) -> None:
        for line, _ in self._calls:
            line.close(contract.CloseReason.ABORTED)
        self._calls = []
