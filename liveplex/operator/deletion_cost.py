"""`pod-deletion-cost`: a ReplicaSet scale-down removes the pods with the fewest sessions first.

Only the few pods a scale-down would pick are marked: the `CANDIDATES` live pods with the fewest
sessions, taken from the pool's emptiest pods (placement's summary candidates: the most free
slots, O(K) to read), carry `active - OFFSET`, a negative cost, so they go before every unmarked pod
(cost 0) and among themselves the emptiest first (platform §4 rule 9). Every other pod carries no
annotation. A pool of 10,000 pods whose sessions move every second then needs a few patches per
roll-up, not one per pod whose count changed; `Budget` caps them operator-wide, and the changes come
most urgent first (a pod that stopped being a candidate is unmarked before anything else, or it would
be removed in its place). A best-effort hint, as ever. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from liveplex.operator import names

CANDIDATES = 8
"""Pods marked per pool: more than a scale-down step usually removes."""
OFFSET = 1_000_000
"""A candidate's cost is its sessions minus this: below every unmarked pod's 0, in session order."""


def deletion_costs(pods: Sequence[Mapping[str, Any]], emptiest: Mapping[str, int],
                   candidates: int = CANDIDATES) -> list[tuple[str, str | None]]:
    """The annotation writes, most urgent first: (pod, value), None to remove the annotation.

    `pods`: the pool's pods as listed; `emptiest`: pod -> active sessions for the pool's emptiest pods.
    Terminating pods are left alone; with one pod nothing is marked (a scale-down has no choice)."""
    live = {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}
    ranked = sorted((active, pod) for pod, active in emptiest.items() if pod in live)
    marked = {pod: str(active - OFFSET) for active, pod in ranked[:min(candidates, len(live) - 1)]}
    unmark, mark = [], []
    for pod, body in sorted(live.items()):
        current = (body["metadata"].get("annotations") or {}).get(names.DELETION_COST)
        wanted = marked.get(pod)
        if current != wanted:
            (mark if wanted is not None else unmark).append((pod, wanted))
    mark.sort(key=lambda change: int(change[1] or 0))
    return unmark + mark


@dataclass(slots=True)
class Budget:
    """A token bucket: at most `rate_per_s` writes a second on average, `burst` at once."""

    rate_per_s: float
    burst: float
    tokens: float = -1.0
    at_s: float | None = None

    def __post_init__(self) -> None:
        if self.rate_per_s <= 0 or self.burst < 1:
            raise ValueError(f"a deletion-cost budget needs rate_per_s > 0 and burst >= 1, got {self}")
        if self.tokens < 0:
            self.tokens = self.burst

    def take(self, now_s: float, wanted: int) -> int:
        """How many of `wanted` writes may go now (the rest wait for a later roll-up)."""
        if self.at_s is not None:
            self.tokens = min(self.burst, self.tokens + (now_s - self.at_s) * self.rate_per_s)
        self.at_s = now_s
        granted = min(wanted, int(self.tokens))
        self.tokens -= granted
        return granted
