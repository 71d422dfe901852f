"""The tick loop every engine runs under: admit between ticks, one frame per session per tick.

live-contract §8. `drive` blocks its thread: it waits on the inbox while idle or between ticks
(that wait is the pod's one timer), runs the engine's tick when the drift-free clock says so, and
hands each tick's outputs to the front end with one flush. An engine exception stops the loop:
every session is aborted, later starts are refused, and the exception propagates to the caller.

With `LiveInfo.tick_groups` G > 1 the period is cut into G sub-ticks, and sub-tick t runs group
t mod G: each session belongs to one group and runs once a period, at the phase that best fits its
caller's arrivals (`live/playout.py`), so a frame waits up to a period / G for its tick, not a period.
A sub-tick that runs late past the next one's due time does not cost that group its turn: sub-ticks
missed less than a period ago run at once, in order; only older ones are skipped. An engine that
varies its groups (issue 44, `live/groups.py`) runs at most `tick_groups` and says in
`Pulse.tick_groups` how many it runs now: the sub-ticks none of them takes are passed over (no
lateness, no flush), so its turns stay at multiples of a period / G.

An export is answered right after the next tick, before its flush: the session's last frame is
that tick's, and the pod that continues it has a whole period to start it before the caller hears
a gap (asked at once, between ticks, the session would have gone quiet for the rest of the period
as well: up to one frame more of silence at every move).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Protocol

from liveplex.live import channel, contract
from liveplex.live.clock import Clock, Wait
from liveplex.live.groups import turn
from liveplex.live.pacing import Pacing


class EngineError(RuntimeError):
    """An engine could not take a session or run a tick; ends the drive loop."""


class Pending(enum.Enum):
    """An engine's answer to an export it gives only after another tick: with tick groups, a
    session leaves right after its own group's turn, so its last frame is the latest it could be."""

    NEXT_TICK = "after the next tick"


class Ticker(Protocol):
    """What an engine implements to run under `drive`."""

    def sessions(self) -> int:
        """Sessions taken and not ended, including those not yet prefilled."""
        ...

    def take(self, sub: channel.LiveSubmission) -> None:
        """Admit a session between ticks (importing `sub.state` when it carries one); may raise."""
        ...

    def export(self, session_id: int, park: bool = False) -> channel.State | Pending | None:
        """Between ticks: take running session `session_id` out of the batch and return its
        handover blob, after sending its sink `Closed(HANDED_OVER)`; None if it does not run;
        `Pending.NEXT_TICK` to be asked again after the next tick. `park` (a pause): it may return
        a `channel.Parked` state instead, which `take` resumes without a prefill."""
        ...

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        """Run one frame for every session of tick group `group`; `skipped` of its ticks were
        missed before it. `due_ns`: when this tick was due, on `time.perf_counter_ns`'s clock
        (None when unknown), so the sessions' buffers can measure how long their frames waited."""
        ...

    def abort(self) -> None:
        """After a fault: close every session with ABORTED (or refuse it, if not started)."""
        ...


def drive(
    inbox: channel.LiveInbox,
    engine: Ticker,
    now_ns: Callable[[], int] = time.perf_counter_ns,
    pacing: Pacing = Pacing(),
) -> None:
    """Run `engine` until every handle is closed and no session is left.

    `now_ns` is the monotonic clock (injectable for tests); tick k is due k periods after the
    first call. A tick's outputs are handed out on `pacing`'s schedule; a start's or a refusal's
    between ticks at once.
    """
    info, pulse = inbox.info, inbox.pulse
    groups = info.tick_groups
    period = info.period_ns() // groups
    """A sub-tick: one group's turn."""
    epoch = now_ns()
    clock = Clock(period)

    exports: list[channel.ExportRequest] = []
    """Asked since the last tick: answered right after the next one."""

    def export_asked() -> None:
        asked = exports[:]
        exports.clear()
        for i, sub in enumerate(asked):
            try:
                blob = engine.export(sub.id, sub.park)
            except BaseException:  # an engine fault still answers this one; the rest are refused with the loop
                sub.reply.set_result(None)
                exports.extend(asked[i + 1:])
                raise
            if blob is Pending.NEXT_TICK:
                exports.append(sub)
            else:
                sub.reply.set_result(blob)

    def admit(sub: channel.Queued) -> None:
        if isinstance(sub, channel.ExportRequest):
            if engine.sessions():
                exports.append(sub)
            else:  # no session runs: none to export, and no tick to wait for
                sub.reply.set_result(None)
        elif engine.sessions() >= info.max_sessions:
            sub.refuse(contract.CloseReason.BUSY)
        else:
            engine.take(sub)
        pulse.sessions = engine.sessions()

    try:
        while True:
            if engine.sessions() == 0:  # idle: no ticks at all
                sub = inbox.get()
                if sub is channel.CLOSED:
                    return
                assert not isinstance(sub, channel.Signal)
                admit(sub)
                inbox.flush()
                clock.resume(now_ns() - epoch)
                continue

            step = clock.poll(now_ns() - epoch)
            if isinstance(step, Wait):
                sub = inbox.get(step.ns)
                if not isinstance(sub, channel.Signal):
                    admit(sub)
                    inbox.flush()
                elif sub is channel.CLOSED:  # handles gone, sessions still running: keep ticking
                    time.sleep(step.ns / 1e9)
                continue

            for sub in inbox.drain_nowait():  # everyone queued joins before this tick
                admit(sub)
            # Sub-ticks missed less than a period ago still run, late and in order: each is the
            # only turn its group gets this period. Older ones are skipped, as whole ticks are.
            caught = min(step.skipped, groups - 1)
            missed = step.skipped - caught
            for tick in range(step.tick - caught, step.tick + 1):
                if groups > 1 and turn(tick % groups, pulse.tick_groups or groups, groups) is None:
                    continue  # an engine running fewer groups than the sub-ticks: no one's turn
                start = now_ns() - epoch
                pulse.observe_lateness(start - tick * period)
                batch = engine.sessions()
                engine.tick((tick - step.tick + step.skipped) // groups, tick % groups, epoch + tick * period)
                pulse.record(now_ns() - epoch - start, missed, batch)
                missed = 0
                if exports:
                    export_asked()
                pulse.sessions = engine.sessions()
                inbox.flush(pacing.wait_ns(tick * period, now_ns() - epoch), pacing.spread_ns)
    except BaseException:
        for sub in exports:
            sub.refuse(contract.CloseReason.ABORTED)
        engine.abort()
        pulse.sessions = 0
        inbox.stop()
        raise
