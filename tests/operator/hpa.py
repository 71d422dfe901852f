"""The HorizontalPodAutoscaler's algorithm for a `Pods` metric, test-side (no HPA controller runs here).

What kube-controller-manager's podautoscaler does each sync, restated from the Kubernetes docs
("Algorithm details", "Configurable scaling behavior"): the usage ratio is the pods' average
over the target; within the 10 % tolerance the count stays, else the recommendation is
`ceil(ratio × pods reporting)`, i.e. `ceil(current × metric / target)`; recommendations are
stabilised (scale up to the lowest, scale down to the highest of the window), then limited by
the policies over each period, counted from the replica changes made in it, then clamped to
[min, max]. Pure: time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 0.1


@dataclass(frozen=True, slots=True)
class Rules:
    """One direction of an HPA `behavior`."""

    window_s: float
    policies: tuple[tuple[str, int, float], ...]
    """(type, value, periodSeconds): `Pods` or `Percent`."""
    select: str


def rules(raw: Mapping[str, Any]) -> Rules:
    return Rules(raw["stabilizationWindowSeconds"],
                 tuple((p["type"], p["value"], p["periodSeconds"]) for p in raw["policies"]),
                 raw.get("selectPolicy", "Max"))


def quantity(text: str) -> float:
    """A Quantity as the HPA reads it (`22400m`, `3`)."""
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


@dataclass
class Autoscaler:
    """One HPA's state: recommendations and scale events, each with its time."""

    min_replicas: int
    max_replicas: int
    target: float
    up: Rules
    down: Rules
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)

    @classmethod
    def of(cls, hpa: Mapping[str, Any]) -> Autoscaler:
        """From a rendered HPA whose first metric is a `Pods` metric with an `AverageValue` target."""
        s = hpa["spec"]
        pods = s["metrics"][0]["pods"]
        return cls(s["minReplicas"], s["maxReplicas"], quantity(pods["target"]["averageValue"]),
                   rules(s["behavior"]["scaleUp"]), rules(s["behavior"]["scaleDown"]))

    def recommend(self, current: int, per_pod: Sequence[float]) -> int:
        if not per_pod:
            return current
        ratio = (sum(per_pod) / len(per_pod)) / self.target
        if abs(ratio - 1) <= TOLERANCE:
            return current
        return math.ceil(ratio * len(per_pod))

    def desired(self, now: float, current: int, per_pod: Sequence[float]) -> int:
        """The replica count to write after this sync; records it."""
        rec = self.recommend(current, per_pod)
        self.recommendations.append((now, rec))
        up = min(r for t, r in self.recommendations if t > now - self.up.window_s or t == now)
        down = max(r for t, r in self.recommendations if t > now - self.down.window_s or t == now)
        horizon = max(self.up.window_s, self.down.window_s, *(p for _, _, p in self.up.policies + self.down.policies))
        self.recommendations = [(t, r) for t, r in self.recommendations if t > now - horizon]
        stabilised = min(max(current, up), down)
        if stabilised > current:
            stabilised = min(stabilised, self._limit(now, current, self.up, +1))
        elif stabilised < current:
            stabilised = max(stabilised, self._limit(now, current, self.down, -1))
        out = max(self.min_replicas, min(self.max_replicas, stabilised))
        if out != current:
            self.events.append((now, out - current))
        return out

    def _limit(self, now: float, current: int, r: Rules, sign: int) -> int:
        proposals = []
        for kind, value, period in r.policies:
            moved = sum(d for t, d in self.events if t > now - period and d * sign > 0)
            start = current - moved
            if kind == "Pods":
                proposals.append(start + sign * value)
            else:
                scaled = start * (1 + sign * value / 100)
                proposals.append(math.ceil(scaled) if sign > 0 else math.floor(scaled))
        if r.select == "Disabled":
            return current
        most = max if (sign > 0) == (r.select == "Max") else min
        return most(proposals)
