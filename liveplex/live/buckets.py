"""`Buckets`: a fixed-bound histogram as plain ints, cheap to observe on a hot path.

Shared by the engine's `Pulse` and the servers' front-end counters; rendered for Prometheus and
`/live/stats` at read time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass(slots=True)
class Buckets:
    """A histogram with fixed upper bounds: per-bucket counts (last is +Inf) and a sum."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def copy(self) -> Buckets:
        """A snapshot: what a reader gets while the owner goes on observing."""
        return Buckets(self.bounds, list(self.counts), self.total)

    def cumulative(self) -> list[int]:
        """Counts at or below each bound, then the overall count (Prometheus' layout)."""
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out
