"""`Breaker`: pods a gateway stopped dialling for a while after a failure (platform §6.2, §7.5).

Pure, time as an argument: `trip(pod, now_ms)` after a failed connect or a pod lost mid-session;
`tripped(now_ms)` lists the pods to exclude from placement until their time is up.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Breaker:
    """Per-pod circuit breakers of one gateway process."""

    open_ms: int
    """How long a tripped pod is excluded."""
    _until: dict[str, int] = field(default_factory=dict)

    def trip(self, pod: str, now_ms: int) -> None:
        self._until[pod] = now_ms + self.open_ms

    def tripped(self, now_ms: int) -> frozenset[str]:
        """The pods excluded at `now_ms`; expired entries are forgotten."""
        for pod in [p for p, until in self._until.items() if until <= now_ms]:
            del self._until[pod]
        return frozenset(self._until)
