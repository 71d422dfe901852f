"""Fault injection (`--fail-after-ticks N`): a `Ticker` around an engine whose tick raises after N ticks.

Installed at construction by whoever asks for the fault (the serve flag, a test), so an engine's
own tick carries no test branch: a pod started without the flag runs the engine itself. The
fault is raised before the engine's tick runs, at a tick with sessions (an idle `drive` does not
tick); `drive` then aborts every session as for any `EngineError` (D9, conformance check 37).
"""

from __future__ import annotations

from liveplex.live import channel
from liveplex.live.drive import EngineError, Pending, Ticker
from liveplex.live.runner import EngineFactory


class InjectedFault(EngineError):
    """Raised by `FailingAfter.tick` once its ticks are spent."""


class FailingAfter:
    """`engine`, whose ticks raise `InjectedFault` after the first `ticks`."""

    def __init__(self, engine: Ticker, ticks: int) -> None:
        self.engine = engine
        self._ticks = ticks
        self._left = ticks

    def sessions(self) -> int:
        return self.engine.sessions()

    def take(self, sub: channel.LiveSubmission) -> None:
        self.engine.take(sub)

    def export(self, session_id: int, park: bool = False) -> channel.State | Pending | None:
        return self.engine.export(session_id, park)

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        if self._left <= 0:
            raise InjectedFault(f"injected fault after {self._ticks} ticks")
        self._left -= 1
        self.engine.tick(skipped, group, due_ns)

    def abort(self) -> None:
        self.engine.abort()


def failing_after(make: EngineFactory, ticks: int) -> EngineFactory:
    """`make`, its engines failing after `ticks` ticks; `make` itself when `ticks` is 0 (never)."""
    if ticks <= 0:
        return make
    return lambda info: FailingAfter(make(info), ticks)
