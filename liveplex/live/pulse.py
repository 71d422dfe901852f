"""Engine counters: each field has one writer, any number of readers (stats, metrics).

live-contract §7. The drive loop writes the tick fields (`sessions`, `ticks`, `late_ticks`,
`busy_us`, `last_tick_us`, `lateness`, `duration`, `batch`); an engine that prefills or keeps a KV
cache writes its own (`prefill`, `kv_positions`, `kv_capacity`), and its sessions' jitter buffers
write `caller_wait`, all on the same thread. Plain ints and
bucket lists are enough under CPython's GIL: readers diff two samples and a torn read is off by at
most one tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from liveplex.live.buckets import Buckets

# Tick lateness buckets, seconds: 1 ms to 320 ms (platform §9).
LATENESS_BUCKETS_S: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
# Tick compute time buckets, seconds: the 80 ms budget sits in the middle.
DURATION_BUCKETS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16, 0.32,
)
# Prefill time per batch of newcomers, seconds (engines that prefill a prompt).
PREFILL_BUCKETS_S: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)
# How long a caller frame waits from its arrival to its tick's due time, seconds (issue 31's budget).
WAIT_BUCKETS_S: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16, 0.32)
# Sessions per tick.
BATCH_BUCKETS: tuple[float, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(slots=True)
class Pulse:
    """What the engine did, cumulative; diff two samples for rates."""

    sessions: int = 0
    """Gauge (drive loop): running sessions, including admitted but not yet prefilled ones."""
    ticks: int = 0
    """Counter: ticks run."""
    late_ticks: int = 0
    """Counter: tick slots skipped (never run) after overruns."""
    busy_us: int = 0
    """Counter: cumulative tick compute time, µs."""
    last_tick_us: int = 0
    """Gauge: compute time of the last tick, µs."""
    lateness: Buckets = field(default_factory=lambda: Buckets(LATENESS_BUCKETS_S))
    """Seconds between a tick's due time and its start."""
    duration: Buckets = field(default_factory=lambda: Buckets(DURATION_BUCKETS_S))
    """Seconds of compute per tick."""
    batch: Buckets = field(default_factory=lambda: Buckets(BATCH_BUCKETS))
    """Sessions per tick."""
    prefill: Buckets = field(default_factory=lambda: Buckets(PREFILL_BUCKETS_S))
    """Seconds per batched prefill of newcomers (the engine, if it prefills)."""
    caller_wait: Buckets = field(default_factory=lambda: Buckets(WAIT_BUCKETS_S))
    """Seconds each played caller frame waited, from the arrival of the bytes that completed it to
    its tick's due time: the caller buffer's share of the round trip (`Jitter`, when it knows both)."""
    kv_positions: int = 0
    """Gauge (the engine, if it has a KV cache): KV-cache positions held by running sessions."""
    kv_capacity: int = 0
    """Gauge (the engine): KV-cache positions its pools hold; 0 when it has none."""
    tick_groups: int = 0
    """Gauge (an engine that varies its tick groups, issue 44): the groups it runs now, which the
    drive loop reads to skip the sub-ticks no group takes; 0: `LiveInfo.tick_groups`, fixed."""
    groups_reason: str = ""
    """Why the engine runs `tick_groups` (`live.groups.Choice.reason`)."""
    regroups: int = 0
    """Counter: changes of `tick_groups`."""

    def record(self, took_ns: int, skipped: int, batch: int) -> None:
        """One tick ran for `batch` sessions and took `took_ns`; `skipped` slots were missed."""
        self.ticks += 1
        self.late_ticks += skipped
        self.busy_us += took_ns // 1000
        self.last_tick_us = took_ns // 1000
        self.duration.observe(took_ns / 1e9)
        self.batch.observe(batch)

    def observe_lateness(self, late_ns: int) -> None:
        self.lateness.observe(max(0, late_ns) / 1e9)
