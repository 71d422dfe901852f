"""`Watchdog`: a relayed session's pod must say something every few ticks, or it is treated as gone.

A pod sends every live session an audio delta each 80 ms tick, so an upstream with no message for
`silence_ms` belongs to a pod that is stopped (SIGSTOP), wedged (a GPU driver that never returns:
its event loop would still answer WebSocket pings, which is why silence is judged on messages,
not pongs) or cut off without a reset. Its sessions get the lost pod's treatment (`server_error`,
`connection_lost`, 1011, the pod's breaker tripped), within `silence_ms` plus one round.

Pure, time as an argument: one timer for every session compares each upstream's message count
with the previous round's, so the per-frame path reads no clock. A round that itself ran more
than half the deadline late means this gateway's own loop was blocked: the quiet was ours, not
the pods', so every clock restarts and no verdict is passed.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar


class Watched(Hashable, Protocol):
    @property
    def received(self) -> int | None:
        """Messages from the pod so far; None while there is nothing to watch (not relaying)."""


_W = TypeVar("_W", bound=Watched)
"""`check` hands back the caller's own sessions, not bare `Watched`s."""


@dataclass(slots=True)
class Watchdog:
    silence_ns: int
    _heard: dict[Watched, tuple[int, int]] = field(default_factory=dict)
    """Per session: (message count, when it last changed)."""

    @property
    def period_ns(self) -> int:
        """How often `check` runs: a quarter of the deadline."""
        return self.silence_ns // 4

    def check(self, sessions: Iterable[_W], now_ns: int, late_ns: int) -> list[_W]:
        """The sessions whose pod said nothing for `silence_ns` at `now_ns`; `late_ns`: how late
        this round runs. Sessions not passed are forgotten."""
        stalled = late_ns > self.silence_ns // 2
        heard: dict[Watched, tuple[int, int]] = {}
        silent: list[_W] = []
        for session in sessions:
            count = session.received
            if count is None:
                continue
            last = self._heard.get(session)
            if last is None or last[0] != count or stalled:
                heard[session] = (count, now_ns)
                continue
            heard[session] = last
            if now_ns - last[1] >= self.silence_ns:
                silent.append(session)
        self._heard = heard
        return silent
