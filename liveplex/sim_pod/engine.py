"""`SimEngine`: the echo under the real drive loop, with an emulated GPU cost curve.

live-contract §12.3. It runs on the engine thread like the PersonaPlex engine, so everything above
the model (drive, channel, front end, bench) is exercised for real without a GPU. The tick holds
the GIL while the front end waits for it, so it is kept short: caller PCM is echoed as bytes and
loudness is judged for all sessions in one numpy pass (a few µs per session, docs/bench.md).
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import time

import numpy as np

from liveplex.continuity import blob, errors, record
from liveplex.live import channel, contract, frames
from liveplex.live.drive import EngineError, Pending
from liveplex.live.jitter import Jitter, caller_buffer
from liveplex.live.line import Line
from liveplex.live.pulse import Pulse
from liveplex.sim_pod import echo
from liveplex.sim_pod.profile import SimProfile

logger = logging.getLogger(__name__)

KIND = "sim"
"""`blob.Header.kind` of the sim's handovers."""
NEXT_DUE = "next_due_unix_ns"
"""A sim blob's header scalar (optional): when the session's next frame was due, on the wall clock."""
TAIL = struct.Struct("<II")
"""A resume record's tail (docs/continuity.md): the echo's loud frames and words after a tick, so a
resumed echo goes on with its words; its delayed frames start silent."""


class InjectedFault(EngineError):
    """Raised by the tick when `fail_after_ticks` is reached (fault injection)."""


Call = tuple[Line, echo.Echo]


class SimEngine:
    """A `Ticker` whose model is `Echo`; `Started` goes out at once (no prefill).

    Sessions sit in `tick_groups` groups, each ticked once a period at its own offset; a newcomer
    joins the group ticked next (its first frame comes soonest) and moves to an earlier one when
    its buffer says its frames wait longer than they need (`Jitter.earlier`), or to the next one
    when its frame is not whole at its turn (`Jitter.later`). A moved session
    leaves right after its own group's turn and its blob says when its next frame was due
    (`NEXT_DUE`), so the importing sim holds it until the turn nearest that time: the caller's
    frames keep their cadence across the move instead of bunching up or falling behind."""

    def __init__(self, profile: SimProfile, pulse: Pulse | None = None) -> None:
        self.profile = profile
        self._waits = None if pulse is None else pulse.caller_wait
        """Where the sessions' buffers observe their frames' waits (`Pulse.caller_wait`)."""
        self._info = profile.info()
        self._max_frames = self._info.max_frames
        self._groups: list[list[Call]] = [[] for _ in range(profile.tick_groups)]
        self._last: tuple[int, int | None] = (0, None)
        """The latest tick: its group and when it was due (`perf_counter_ns`)."""
        self._arriving: list[tuple[Call, int]] = []
        """Sessions taken and not yet in a group: newcomers join the next turn (whichever group it
        is: after idle, `drive` starts at any group), imports the turn nearest their next frame's
        due time (`perf_counter_ns`)."""
        self._ticks = 0

    def sessions(self) -> int:
        return sum(map(len, self._groups)) + len(self._arriving)

    def take(self, sub: channel.LiveSubmission) -> None:
        p = self.profile
        jitter = caller_buffer(frames.FRAME_SAMPLES, p.prebuffer_frames, p.jitter_frames, frames.PERIOD_NS,
                               p.tick_groups, self._waits)
        core = echo.Echo(frames.FRAME_SAMPLES, p.echo_frames, p.word_frames)
        if sub.state is None:
            line = Line.start(sub, jitter, self._max_frames)
        else:
            line = self._resume(sub, jitter, core)
        if line is not None:
            if line.checkpoints:  # the record's head, right after `Started`
                line.checkpoint(record.head(self._header(line, core), {}, 0, TAIL.size))
            due = self._due_of(sub)  # a newcomer joins whichever group ticks next (0: any turn)
            self._arriving.append(((line, core), 0 if due is None else due))

    def export(self, session_id: int) -> bytes | Pending | None:
        """The session's blob: its line's part (jitter, counters) and its echo (delayed frames,
        counters, words to say). Exact: the importing sim says and plays what this one would.
        Asked after another group's turn: `Pending.NEXT_TICK`."""
        last_group, last_due = self._last
        for g, calls in enumerate(self._groups):
            for i, call in enumerate(calls):
                if call[0].id == session_id:
                    if g != last_group:  # leave right after its own turn: its last frame the latest
                        return Pending.NEXT_TICK
                    data = self._export(call, last_due)
                    if data is not None:
                        del calls[i]
                    return data
        for i, (call, _) in enumerate(self._arriving):
            if call[0].id == session_id:
                data = self._export(call, None)
                if data is not None:
                    del self._arriving[i]
                return data
        return None

    def _export(self, call: Call, due_ns: int | None) -> bytes | None:
        """The blob of `call` (None: it ends at the next tick anyway); `due_ns`: when its last
        frame was due, so the importer knows when the next one is."""
        line, core = call
        part = line.hand_over()
        if part is None:
            return None
        scalars, arrays = part
        state, delay = core.state()
        if due_ns is not None:  # on the wall clock: another pod's perf counter is not ours
            state[NEXT_DUE] = due_ns + frames.PERIOD_NS + time.time_ns() - time.perf_counter_ns()
        header = dataclasses.replace(self._header(line, core), state={**scalars, **state})
        return blob.encode(header, {**arrays, "delay": np.frombuffer(delay, np.uint8)})

    def _due_of(self, sub: channel.LiveSubmission) -> int | None:
        """When an imported session's next frame is due here (`perf_counter_ns`), if its blob says
        and it lies within a period from now (clocks a period apart are not trusted)."""
        if sub.state is None or record.is_record(sub.state) or len(self._groups) == 1:
            return None
        h = blob.decode(sub.state)
        unix = h.header.state.get(NEXT_DUE) if isinstance(h, blob.Handover) else None
        if not isinstance(unix, int) or isinstance(unix, bool):
            return None
        now = time.perf_counter_ns()
        due = unix - (time.time_ns() - now)
        return due if now - frames.PERIOD_NS < due < now + frames.PERIOD_NS else None

    def _header(self, line: Line, core: echo.Echo) -> blob.Header:
        """What a blob or a record says the session is, with the echo's counters."""
        assert line.session is not None, "a started line knows its session"
        return blob.Header(KIND, self._info.model, self._info.context_frames, line.session.voice, line.frames,
                           self._settings(), {"loud_frames": core.loud_frames, "words": core.words})

    def _settings(self) -> dict[str, str]:
        """The settings a handover must agree on: the echo's delay (the jitter cap is checked by size)."""
        return {"echo_frames": dict(self._info.engine)["echo_frames"]}

    def _resume(self, sub: channel.LiveSubmission, jitter: Jitter, core: echo.Echo) -> Line | None:
        """The line of a session continuing from `sub.state`, a blob or a record; one that does
        not fit is refused `ABORTED` (logged with its code and parameter).

        From a record (its pod was lost): the frame count and the echo's counters go on, the
        delayed frames and the jitter buffer start empty, commentary not yet said is lost."""
        assert sub.state is not None
        try:
            if record.is_record(sub.state):
                rec = record.accept(sub.state, self._info, KIND, sub.session.voice)
                if rec.head.scalar("tick_bytes", int) != 0 or rec.head.scalar("tail_bytes", int) != TAIL.size:
                    raise errors.state(("header", "state", "tail_bytes"), "is not the sim's tail")
                loud, words = (TAIL.unpack(rec.tail) if rec.tail is not None
                               else (rec.head.scalar("loud_frames", int), rec.head.scalar("words", int)))
                if loud < 0 or words < 0:
                    raise errors.state(("header", "state", "words"), "counts below zero")
                core.restore(loud, words, [], core.state()[1])  # its delay as it is: silent
                if not 0 <= rec.frames < self._max_frames:
                    raise errors.state(("header", "frames"), f"is {rec.frames}, outside 0..{self._max_frames - 1}")
                return Line.start(sub, jitter, self._max_frames, rec.frames)
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

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        G = len(self._groups)
        self._last = (group, due_ns)
        calls = self._groups[group]
        if self._arriving:
            half = frames.PERIOD_NS // G // 2
            waiting: list[tuple[Call, int]] = []
            for call, due in self._arriving:  # one pass: join now, or wait for a later turn
                if due_ns is None or due <= due_ns + half:
                    calls.append(call)
                else:
                    waiting.append((call, due))
            self._arriving = waiting
        live = []
        for call in calls:  # 1. close ended sessions first
            line = call[0]
            reason = line.listen()
            if reason is None:
                live.append(call)
            else:
                line.close(reason)
        self._ticks += 1
        if self.profile.fail_after_ticks and self._ticks > self.profile.fail_after_ticks:
            self._groups[group] = live
            raise InjectedFault(f"injected fault after {self.profile.fail_after_ticks} ticks")
        if G > 1:  # a frame not whole yet: the next group's turn, not silence (`Jitter.later`)
            ready: list[Call] = []
            deferred = self._groups[(group + 1) % G]
            for call in live:
                (deferred if call[0].jitter.later() else ready).append(call)
            live = ready
        cost_us = self.profile.cost_us(len(live))
        if cost_us:
            time.sleep(cost_us / 1e6)  # 2. "compute": the GIL is free for the front end meanwhile
        heard = [line.hear_pcm(skipped, due_ns) for line, _ in live]  # 3. one frame each
        loud = echo.loud_rows(np.frombuffer(b"".join(heard), "<i2").reshape(len(heard),
                                                                    frames.FRAME_SAMPLES))
        kept: list[Call] = []
        for call, pcm, is_loud in zip(live, heard, loud.tolist(), strict=True):
            for text in call[0].commentary():
                call[1].say(text)
            line, core = call
            out, word = core.step(pcm, is_loud)
            if line.say(out, word):
                if line.checkpoints:
                    line.checkpoint(record.ticks(line.frames - 1, 1, b"", TAIL.pack(core.loud_frames, core.words)))
                earlier = line.jitter.earlier
                if earlier:  # 4. a better phase: its next frame comes from an earlier group
                    self._groups[(group - earlier) % G].append(call)
                else:
                    kept.append(call)
        self._groups[group] = kept  # 5. sinks gone: dropped silently

    def abort(self) -> None:
        for calls in [*self._groups, [call for call, _ in self._arriving]]:
            for line, _ in calls:
                line.close(contract.CloseReason.ABORTED)
        self._groups = [[] for _ in self._groups]
        self._arriving = []
