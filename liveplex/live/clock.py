"""The drift-free tick clock: tick k is due k periods after the epoch, overruns are skipped.

live-contract §6. Pure: elapsed time arrives as an argument, so tests drive it with any sequence.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing is due yet; the next tick is due in `ns` (always > 0)."""

    ns: int


@dataclass(frozen=True, slots=True)
class Run:
    """Run tick `tick` now; `skipped` due ticks were missed and will never run."""

    tick: int
    skipped: int


def due(next_tick: int, elapsed_ns: int, period_ns: int) -> Wait | Run:
    """What to do at `elapsed_ns` when tick `next_tick` is the next one not yet run."""
    now = elapsed_ns // period_ns
    if now < next_tick:
        return Wait(period_ns * next_tick - elapsed_ns)
    return Run(tick=now, skipped=now - next_tick)


class Clock:
    """Runs only the latest due tick after an overrun, never a burst of catch-up ticks."""

    __slots__ = ("period_ns", "next")

    def __init__(self, period_ns: int) -> None:
        self.period_ns = period_ns
        self.next = 0

    def poll(self, elapsed_ns: int) -> Wait | Run:
        step = due(self.next, elapsed_ns, self.period_ns)
        if isinstance(step, Run):
            self.next = step.tick + 1
        return step

    def resume(self, elapsed_ns: int) -> None:
        """After idle: the next poll runs at once and idle slots do not count as skipped."""
        self.next = max(self.next, elapsed_ns // self.period_ns)
