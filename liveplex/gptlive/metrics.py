"""Prometheus exposition of the engine's `Pulse` and the front end's `Tally` (platform §9 names).

A custom collector reads both at scrape time, so nothing on the tick or frame path touches
prometheus_client. Each app gets its own registry (tests run several apps in one process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from liveplex.gptlive.tally import Tally
from liveplex.live import contract
from liveplex.live.pulse import Buckets, Pulse


def _histogram(name: str, doc: str, buckets: Buckets) -> HistogramMetricFamily:
    cumulative = buckets.cumulative()
    rows = [(repr(float(b)), c) for b, c in zip(buckets.bounds, cumulative)]
    rows.append(("+Inf", cumulative[-1]))
    return HistogramMetricFamily(name, doc, buckets=rows, sum_value=buckets.total)


class LiveCollector(Collector):
    """Reads `Pulse` and `Tally` on every scrape."""

    def __init__(self, info: contract.LiveInfo, pulse: Callable[[], Pulse | None], tally: Tally,
                 ready: Callable[[], bool]) -> None:
        self._info = info
        self._pulse = pulse
        self._tally = tally
        self._ready = ready

    def collect(self) -> Iterator[Metric]:
        t = self._tally
        yield InfoMetricFamily("liveengine_engine", "What the engine serves and how it runs.",
                               value={"model": self._info.model, **dict(self._info.engine)})
        yield GaugeMetricFamily("liveengine_session_capacity", "Advertised capacity.",
                                value=self._info.max_sessions)
        yield GaugeMetricFamily("liveengine_sockets_open", "Open WebSockets.",
                                value=t.sockets_open)
        yield GaugeMetricFamily("liveengine_ready", "1 when the engine serves.",
                                value=int(self._ready()))
        yield CounterMetricFamily("liveengine_sessions_accepted", "Sessions started.",
                                  value=t.accepted)
        for name, doc, counts, label in (
            ("liveengine_sessions_rejected", "Refused starts by reason.", t.rejected, "reason"),
            ("liveengine_sessions_closed", "Ended sessions by reason.", t.closed, "reason"),
            ("liveengine_errors", "Error events sent, by code.", t.errors, "code"),
        ):
            family = CounterMetricFamily(name, doc, labels=[label])
            for key, value in sorted(counts.items()):
                family.add_metric([key], value)
            yield family
        yield CounterMetricFamily("liveengine_underruns", "Jitter-buffer dry spells.",
                                  value=t.underruns)
        yield CounterMetricFamily("liveengine_dropped_samples",
                                  "Caller samples dropped by the jitter cap.",
                                  value=t.dropped_samples)
        pulse = self._pulse()
        if pulse is None:
            return
        yield GaugeMetricFamily("liveengine_sessions_active", "Running sessions.",
                                value=pulse.sessions)
        yield CounterMetricFamily("liveengine_ticks", "Ticks run.", value=pulse.ticks)
        yield CounterMetricFamily("liveengine_ticks_skipped",
                                  "Tick slots skipped after overruns.", value=pulse.late_ticks)
        yield CounterMetricFamily("liveengine_tick_busy_seconds", "Cumulative tick compute.",
                                  value=pulse.busy_us / 1e6)
        yield _histogram("liveengine_tick_duration_seconds", "Compute time per tick.",
                         pulse.duration)
        yield _histogram("liveengine_tick_lateness_seconds", "Tick start minus its due time.",
                         pulse.lateness)
        yield _histogram("liveengine_batch_size", "Sessions per tick.", pulse.batch)
        yield _histogram("liveengine_prefill_duration_seconds", "Prefill time per batch of newcomers.",
                         pulse.prefill)
        if pulse.kv_capacity:
            yield GaugeMetricFamily("liveengine_kv_occupancy_ratio",
                                    "KV-cache positions held by running sessions / positions allocated.",
                                    value=pulse.kv_positions / pulse.kv_capacity)


def registry(collector: LiveCollector) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def render(reg: CollectorRegistry) -> bytes:
    """The Prometheus text exposition."""
    return generate_latest(reg)
