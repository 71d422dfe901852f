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

from liveplex.continuity import errors
from liveplex.live import channel, contract, frames, groups
from liveplex.live.drive import Pending
from liveplex.live.jitter import Jitter, caller_buffer
from liveplex.live.line import Line
from liveplex.live.pulse import Pulse
from liveplex.sim_pod import echo, handover
from liveplex.sim_pod.profile import AUTO, SimProfile

logger = logging.getLogger(__name__)

Call = tuple[Line, echo.Echo]


class SimEngine:
    """A `Ticker` whose model is `Echo`; `Started` goes out at once (no prefill).

    Sessions sit in `tick_groups` groups, each ticked once a period at its own offset; a newcomer
    joins the group ticked next (its first frame comes soonest) and moves to an earlier one when
    its buffer says its frames wait longer than they need (`Jitter.earlier`), or to the next one
    when its frame is not whole at its turn (`Jitter.later`). A moved session
    leaves right after its own group's turn and its blob says when its next frame was due
    (`handover.NEXT_DUE`), so the importing sim holds it until the turn nearest that time: the caller's
    frames keep their cadence across the move instead of bunching up or falling behind.

    With `tick_groups` 0 (`profile.AUTO`) the sim runs PersonaPlex's rule on its modeled costs:
    each period starts with `live.groups.choose` (held by `groups.Hold`) and, when G changes, the
    sessions regroup (`groups.regroup`); a group is then a sub-tick of the 4 a period holds."""

    def __init__(self, profile: SimProfile, pulse: Pulse | None = None) -> None:
        self.profile = profile
        self._waits = None if pulse is None else pulse.caller_wait
        """Where the sessions' buffers observe their frames' waits (`Pulse.caller_wait`)."""
        self._info = profile.info()
        self._max_frames = self._info.max_frames
        self._most = profile.most_groups
        self._groups: list[list[Call]] = [[] for _ in range(self._most)]
        """Sessions by the sub-tick they take their turn at (only the active groups' hold any)."""
        self._pulse = pulse or Pulse()
        self._hold = groups.Hold(self._most) if profile.tick_groups == AUTO else None
        """The varying G's hysteresis; None: `tick_groups` fixed."""
        self._active = self._most
        if self._hold is not None:
            self._pulse.tick_groups = self._most
        self._last: tuple[int, int | None] = (0, None)
        """The latest tick: its group and when it was due (`perf_counter_ns`)."""
        self._arriving: list[tuple[Call, int]] = []
        """Sessions taken and not yet in a group: newcomers join the next turn (whichever group it
        is: after idle, `drive` starts at any group), imports the turn nearest their next frame's
        due time (`perf_counter_ns`)."""

    def sessions(self) -> int:
        return sum(map(len, self._groups)) + len(self._arriving)

    def take(self, sub: channel.LiveSubmission) -> None:
        p = self.profile
        jitter = caller_buffer(frames.FRAME_SAMPLES, p.prebuffer_frames, p.jitter_frames, frames.PERIOD_NS,
                               self._active, self._waits)
        core = echo.Echo(frames.FRAME_SAMPLES, p.echo_frames, p.word_frames)
        due = 0  # a newcomer joins whichever group ticks next (0: any turn)
        if sub.state is None:
            line = Line.start(sub, jitter, self._max_frames)
        else:
            imported = self._resume(sub, jitter, core)
            if imported is None:
                return
            line = Line.start(sub, jitter, self._max_frames, imported.frames)
            due = self._due_of(imported.next_due_unix_ns) or 0
        if line is not None:
            if line.checkpoints:  # the record's head, right after `Started`
                line.checkpoint(handover.record_head(self._info, self._voice(line), line.frames, core))
            self._arriving.append(((line, core), due))

    def export(self, session_id: int, park: bool = False) -> bytes | Pending | None:
        """The session's blob: its line's part (jitter, counters) and its echo (delayed frames,
        counters, words to say). Exact: the importing sim says and plays what this one would.
        A pause (`park`) holds it too: a sim's state is a few kB.
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
        frame was due."""
        line, core = call
        carried = line.hand_over()
        if carried is None:
            return None
        return handover.export(self._info, self._voice(line), line.frames, carried, core, due_ns)

    def _due_of(self, unix_ns: int | None) -> int | None:
        """When an imported session's next frame is due here (`perf_counter_ns`), if its blob says
        (`unix_ns`) and it lies within a period from now (clocks a period apart are not trusted)."""
        if unix_ns is None or self._active == 1:
            return None
        now = time.perf_counter_ns()
        due = unix_ns - (time.time_ns() - now)
        return due if now - frames.PERIOD_NS < due < now + frames.PERIOD_NS else None

    @staticmethod
    def _voice(line: Line) -> str:
        assert line.session is not None, "a started line knows its session"
        return line.session.voice

    def _resume(self, sub: channel.LiveSubmission, jitter: Jitter, core: echo.Echo) -> handover.Imported | None:
        """`sub.state`, a blob or a record, loaded into `jitter` and `core`; one that does not fit
        is refused `ABORTED` (logged with its code and parameter)."""
        assert sub.state is not None
        try:
            return handover.restore(channel.blob_of(sub.state), self._info, sub.session.voice, jitter, core)
        except errors.HandoverError as exc:
            logger.warning("handover refused", extra={"session_id": sub.id, "code": exc.code.value,
                                                      "param": exc.param, "reason": exc.message})
            sub.refuse(contract.CloseReason.ABORTED)
            return None

    def _choose(self) -> None:
        """A period's start under `AUTO`: the groups the modeled tick leaves room for; when they
        change, every session moves to the first new turn at or after its old one."""
        assert self._hold is not None
        choice = groups.choose(lambda _, rows: self.profile.step_s(rows), self.sessions(), 0.0, frames.PERIOD_NS / 1e9,
                               most=self._most)
        G = self._hold.update(choice.groups)
        self._pulse.groups_reason = choice.reason
        if G == self._active:
            return
        calls = [(sub, call) for sub, held in enumerate(self._groups) for call in held]
        placed = groups.regroup([sub for sub, _ in calls], G, self._most, [len(calls)] * G)
        turns = groups.phases(G, self._most)
        self._groups = [[] for _ in range(self._most)]
        for (_, call), g in zip(calls, placed, strict=True):
            call[0].jitter.regroup(G)
            self._groups[turns[g]].append(call)
        for call, _ in self._arriving:
            call[0].jitter.regroup(G)
        logger.info("tick groups changed", extra={"tick_groups": G, "was": self._active, "reason": choice.reason})
        self._active = self._pulse.tick_groups = G
        self._pulse.regroups += 1

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        if group == 0 and self._hold is not None:
            self._choose()
        G, stride = self._most, self._most // self._active
        self._last = (group, due_ns)
        calls = self._groups[group]
        if self._arriving:
            half = frames.PERIOD_NS // self._active // 2
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
        if self._active > 1:  # a frame not whole yet: the next group's turn, not silence (`Jitter.later`)
            ready: list[Call] = []
            deferred = self._groups[(group + stride) % G]
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
                    line.checkpoint(handover.record_tick(line.frames, core))
                earlier = line.jitter.earlier
                if earlier:  # 4. a better phase: its next frame comes from an earlier group
                    self._groups[(group - earlier * stride) % G].append(call)
                else:
                    kept.append(call)
        self._groups[group] = kept  # 5. sinks gone: dropped silently

    def abort(self) -> None:
        for calls in [*self._groups, [call for call, _ in self._arriving]]:
            for line, _ in calls:
                line.close(contract.CloseReason.ABORTED)
        self._groups = [[] for _ in self._groups]
        self._arriving = []
