"""`PodSnapshot`: one consistent read of a pod's engine `Pulse` and front-end counters.

`/live/stats`, `/metrics` and the Redis heartbeat all read a snapshot taken by `snapshot()`, so
the three never disagree on what a pod is doing (and there is one place that reads `Pulse`).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from liveplex.gptlive.server.stats import FrontSnapshot
from liveplex.live import contract, frames
from liveplex.live.buckets import Buckets
from liveplex.live.pulse import Pulse
from liveplex.pod.pause import PauseSnapshot

LATENESS_BUDGET_MS = 20
"""Default budget of `liveplex_engine_ticks_late_total` (platform §3.1 `latenessBudgetMillis`); it is
one of the lateness histogram's bounds, so the count is exact."""


REATTACH_GAP_BUCKETS_S: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 15, 30, 60, 120, 300)
"""From a session's park to its re-attach (the model's audio meanwhile never reaches the caller):
an SDK reconnects in 0.4-1.5 s, plus its gateway's look-up and dial; the window is at most 300 s."""
REATTACH_RESULTS: tuple[str, ...] = ("parked", "taken_over", "not_found")
"""`Parking.reattaches`' results, exported from 0: a counter whose first scrape already holds its
first events loses them from every `rate()`."""
PARKED_ENDS: tuple[str, ...] = ("window_passed", "expired")
"""`Parking.parked_ended`'s usual reasons, exported from 0 likewise."""
WINDOW_PASSED = "window_passed"


@dataclass(frozen=True, slots=True)
class ParkingSnapshot:
    """`Parking` at one moment, with the sessions parked then."""

    parked: int = 0
    reattaches: dict[str, int] = field(default_factory=dict)
    parked_ended: dict[str, int] = field(default_factory=dict)
    gap: Buckets = field(default_factory=lambda: Buckets(REATTACH_GAP_BUCKETS_S))


@dataclass(slots=True)
class Parking:
    """What a pod's re-attach did (docs/continuity.md "Re-attach"), as plain counters; one writer,
    `EngineBackend` on the event loop."""

    reattaches: Counter[str] = field(default_factory=Counter)
    """Result -> re-attach upgrades: `parked` (a parked session continued), `taken_over` (a socket
    still open gave its session up: a half-open gateway), `not_found` (no such session runs here)."""
    parked_ended: Counter[str] = field(default_factory=Counter)
    """Reason -> parked sessions that ended with no caller back: `window_passed` (the grace
    window), or the session's own end meanwhile (`expired`: `capacity.maxSeconds`)."""
    gap: Buckets = field(default_factory=lambda: Buckets(REATTACH_GAP_BUCKETS_S))
    """Seconds from a session's park to its re-attach."""

    def reattached(self, parked_ns: int | None, now_ns: int) -> None:
        """A socket continued a session, parked since `parked_ns` (None: it took over a socket)."""
        if parked_ns is None:
            self.reattaches["taken_over"] += 1
            return
        self.reattaches["parked"] += 1
        self.gap.observe(max(0, now_ns - parked_ns) / 1e9)

    def ended(self, reason: str) -> None:
        """A parked session ended (`connection.Ended.reason`): its window passing ends it as a
        dropped socket's session ends, `remote_hangup` (`Parked._window_passed`)."""
        self.parked_ended[WINDOW_PASSED if reason == "remote_hangup" else reason] += 1

    def snapshot(self, parked: int) -> ParkingSnapshot:
        return ParkingSnapshot(parked, dict(self.reattaches), dict(self.parked_ended), self.gap.copy())


@dataclass(frozen=True, slots=True)
class PodSnapshot:
    """What a pod is doing; engine fields are zero before the engine runs."""

    info: contract.LiveInfo
    front: FrontSnapshot
    ready: bool
    draining: bool
    sessions: int
    """Running sessions (`Pulse.sessions`)."""
    reserved: int
    """Sessions placed on this pod and not started yet, as Redis held them at the last heartbeat
    (0 for a standalone pod): with `sessions`, the occupancy an autoscaler reads (platform §8)."""
    ticks: int
    busy_us: int
    last_tick_us: int
    late_ticks: int
    """Tick slots skipped after overruns."""
    lateness: Buckets
    duration: Buckets
    batch: Buckets
    prefill: Buckets
    caller_wait: Buckets
    """Seconds each played caller frame waited for its tick (`Pulse.caller_wait`)."""
    kv_positions: int
    kv_capacity: int
    tick_groups: int
    """The tick groups the engine runs now (issue 44: it varies under `--tick-groups 0`)."""
    groups_reason: str
    """Why it runs them (`live.groups.Choice.reason`); empty when G is fixed."""
    regroups: int
    """Changes of `tick_groups` since start."""
    model_load_s: float
    lateness_budget_ms: int = LATENESS_BUDGET_MS
    parking: ParkingSnapshot = field(default_factory=ParkingSnapshot)
    """Sessions parked for a re-attach, and what the re-attaches did."""
    pause: PauseSnapshot = field(default_factory=PauseSnapshot)
    """Sessions out of the engine's batch (docs/pause.md), and what the pauses and wakes did."""

    @property
    def ticks_late(self) -> int:
        """Ticks run later than the lateness budget (at or under a bound counts as within)."""
        bound = self.lateness_budget_ms / 1000
        within = bisect.bisect_right(self.lateness.bounds, bound)
        return sum(self.lateness.counts[within:])

    @property
    def kv_occupancy(self) -> float | None:
        return self.kv_positions / self.kv_capacity if self.kv_capacity else None


def snapshot(info: contract.LiveInfo, pulse: Pulse | None, front: FrontSnapshot, ready: bool,
             draining: bool, model_load_s: float, lateness_budget_ms: int = LATENESS_BUDGET_MS,
             reserved: int = 0, parking: ParkingSnapshot | None = None,
             pause: PauseSnapshot | None = None) -> PodSnapshot:
    """Copy everything readers need now; `pulse` is None before the engine channel opens."""
    p = pulse or Pulse()
    return PodSnapshot(
        info=info, front=front, ready=ready, draining=draining, sessions=p.sessions, reserved=reserved,
        ticks=p.ticks,
        busy_us=p.busy_us, last_tick_us=p.last_tick_us, late_ticks=p.late_ticks,
        lateness=p.lateness.copy(), duration=p.duration.copy(), batch=p.batch.copy(),
        prefill=p.prefill.copy(), caller_wait=p.caller_wait.copy(), kv_positions=p.kv_positions,
        kv_capacity=p.kv_capacity,
        tick_groups=p.tick_groups or info.tick_groups, groups_reason=p.groups_reason, regroups=p.regroups,
        model_load_s=model_load_s, lateness_budget_ms=lateness_budget_ms,
        parking=ParkingSnapshot() if parking is None else parking,
        pause=PauseSnapshot() if pause is None else pause,
    )


def _histogram(buckets: Buckets) -> dict[str, list[float] | list[int] | float]:
    """A histogram for `/live/stats`: upper bounds, per-bucket counts (last is +Inf) and the sum
    of what was observed (a reader diffs two for a mean, as with Prometheus' `_sum`)."""
    return {"bounds_s": list(buckets.bounds), "counts": list(buckets.counts), "sum_s": buckets.total}


def stats_json(s: PodSnapshot) -> dict[str, Any]:
    """The `/live/stats` document."""
    f = s.front
    return {
        **dict(s.info.engine),
        "sessions": s.sessions, "reserved": s.reserved, "parked": s.parking.parked,
        "max_sessions": s.info.max_sessions,
        "frame_ms": frames.FRAME_MS,
        "ticks": s.ticks, "tick_busy_us": s.busy_us, "last_tick_us": s.last_tick_us,
        "late_ticks": s.late_ticks, "ticks_late": s.ticks_late, "draining": s.draining,
        "sockets": f.sockets_open, "underruns": f.underruns, "dropped_samples": f.dropped_samples,
        "refused_busy": f.rejected.get("server_busy", 0),
        "dropped_connections": f.dropped,
        "tick_lateness": _histogram(s.lateness), "tick_duration": _histogram(s.duration),
        "batch_size": _histogram(s.batch), "prefill": _histogram(s.prefill),
        "caller_wait": _histogram(s.caller_wait),
        "kv_occupancy": s.kv_occupancy,
        "tick_groups": s.tick_groups, "tick_groups_reason": s.groups_reason, "regroups": s.regroups,
        **_pause_json(s.pause),
    }


def _pause_json(p: PauseSnapshot) -> dict[str, Any]:
    """The idle pause's part of `/live/stats`: `sessions` runs in the engine, `paused` is out of it
    (`waiting` of those never ran: a call before its first speech)."""
    return {"paused": p.paused, "waiting": p.waiting, "pauses": p.pauses, "wakes": p.wakes,
            "refused_wakes": p.refused_wakes, "parked_bytes": p.parked_bytes,
            "wake_latency": _histogram(p.wake)}


def _delta(after: Buckets, before: Buckets | None) -> list[int]:
    if before is None:
        return list(after.counts)
    return [a - b for a, b in zip(after.counts, before.counts)]


def quantile_upper_s(counts: list[int], bounds: tuple[float, ...], q: float) -> float:
    """The upper bound of the bucket holding quantile `q` (the last finite bound for +Inf); 0 when
    empty. An over-estimate by at most one bucket: what a scraper's `histogram_quantile` sees."""
    total = sum(counts)
    if not total:
        return 0.0
    rank, seen = q * total, 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= rank:
            return bounds[min(i, len(bounds) - 1)]
    return bounds[-1]


@dataclass(frozen=True, slots=True)
class Window:
    """Tick health between two snapshots (a heartbeat period): what a pod publishes to placement."""

    tick_p99_us: int
    """p99 tick compute time."""
    late_p99_ms: float
    """p99 tick lateness."""
    late_permille: int
    """Ticks later than the budget, per thousand ticks."""
    ticks: int = 0
    """Ticks run in the window."""

    def degraded(self, budget_ms: int, sessions: int) -> bool:
        """platform §3.2: p99 lateness over the budget; or an engine that ran no tick at all while it
        had sessions (a wedged GPU call makes no late ticks, it makes none)."""
        return self.late_p99_ms > budget_ms or (sessions > 0 and self.ticks == 0)


def window(now: PodSnapshot, before: PodSnapshot | None) -> Window:
    durations = _delta(now.duration, before.duration if before else None)
    lateness = _delta(now.lateness, before.lateness if before else None)
    ticks = sum(lateness)
    late = now.ticks_late - (before.ticks_late if before else 0)
    return Window(
        tick_p99_us=round(quantile_upper_s(durations, now.duration.bounds, 0.99) * 1e6),
        late_p99_ms=quantile_upper_s(lateness, now.lateness.bounds, 0.99) * 1000,
        late_permille=1000 * late // ticks if ticks else 0,
        ticks=ticks,
    )
