"""`SimEngine`: the echo under the real drive loop, with an emulated GPU cost curve.

live-contract §12.3. It runs on the engine thread like the PersonaPlex engine, so everything above
the model (drive, channel, front end, bench) is exercised for real without a GPU. The tick holds
the GIL while the front end waits for it, so it is kept short: caller PCM is echoed as bytes and
loudness is judged for all sessions in one numpy pass (a few µs per session, docs/bench.md).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from liveplex.continuity import blob, errors
from liveplex.live import channel, contract, frames
from liveplex.live.drive import EngineError
from liveplex.live.jitter import Jitter
from liveplex.live.line import Line
from liveplex.sim_pod import echo
from liveplex.sim_pod.profile import SimProfile

logger = logging.getLogger(__name__)

KIND = "sim"
"""`blob.Header.kind` of the sim's handovers."""


class InjectedFault(EngineError):
    """Raised by the tick when `fail_after_ticks` is reached (fault injection)."""


class SimEngine:
    """A `Ticker` whose model is `Echo`; `Started` goes out at once (no prefill)."""

    def __init__(self, profile: SimProfile) -> None:
        self.profile = profile
        self._info = profile.info()
        self._max_frames = self._info.max_frames
        self._calls: list[tuple[Line, echo.Echo]] = []
        self._ticks = 0

    def sessions(self) -> int:
        return len(self._calls)

    def take(self, sub: channel.LiveSubmission) -> None:
        p = self.profile
        jitter = Jitter(frames.FRAME_SAMPLES, p.prebuffer_frames, p.jitter_frames)
        core = echo.Echo(frames.FRAME_SAMPLES, p.echo_frames, p.word_frames)
        if sub.state is None:
            line = Line.start(sub, jitter, self._max_frames)
        else:
            line = self._resume(sub, jitter, core)
        if line is not None:
            self._calls.append((line, core))

    def export(self, session_id: int) -> bytes | None:
        """The session's blob: its line's part (jitter, counters) and its echo (delayed frames,
        counters, words to say). Exact: the importing sim says and plays what this one would."""
        for i, (line, core) in enumerate(self._calls):
            if line.id != session_id:
                continue
            part = line.hand_over()
            if part is None:
                return None
            del self._calls[i]
            scalars, arrays = part
            state, delay = core.state()
            assert line.session is not None, "a started line knows its session"
            header = blob.Header(KIND, self._info.model, self._info.context_frames, line.session.voice,
                                 line.frames, self._settings(), {**scalars, **state})
            return blob.encode(header, {**arrays, "delay": np.frombuffer(delay, np.uint8)})
        return None

    def _settings(self) -> dict[str, str]:
        """The settings a handover must agree on: the echo's delay (the jitter cap is checked by size)."""
        return {"echo_frames": dict(self._info.engine)["echo_frames"]}

    def _resume(self, sub: channel.LiveSubmission, jitter: Jitter, core: echo.Echo) -> Line | None:
        """The line of a session continuing from `sub.state`; a blob that does not fit is
        refused `ABORTED` (logged with its code and parameter)."""
        assert sub.state is not None
        try:
            h = blob.accept(sub.state, self._info, KIND, sub.session.voice)
            said = h.scalar("said", list)
            if not all(isinstance(w, str) for w in said):
                raise errors.state(("header", "state", "said"), "holds a word that is not a string")
            try:
                core.restore(h.scalar("loud_frames", int), h.scalar("words", int), said,
                             h.array("delay", "|u1", (None,)).tobytes())
            except ValueError as exc:
                raise errors.state(("arrays", "delay"), str(exc)) from None
            return Line.resume(sub, jitter, self._max_frames, h)
        except errors.HandoverError as exc:
            logger.warning("handover refused", extra={"session_id": sub.id, "code": exc.code.value,
                                                      "param": exc.param, "reason": exc.message})
            sub.refuse(contract.CloseReason.ABORTED)
            return None

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
