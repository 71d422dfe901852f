"""Prometheus exposition of `GatewayStats` (platform §9's gateway names), read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive.server.exposition import histogram


class GatewayCollector(Collector):
    def __init__(self, stats: GatewayStats, sockets: Callable[[], int]) -> None:
        self._stats = stats
        self._sockets = sockets

    def collect(self) -> Iterator[Metric]:
        s = self._stats
        active = GaugeMetricFamily("gateway_sessions_active", "Sessions being relayed.", labels=["liveengine"])
        for pool, n in sorted(s.sessions_active.items()):
            active.add_metric([pool], n)
        yield active
        yield GaugeMetricFamily("gateway_sockets_open", "Open client WebSockets.", value=self._sockets())
        for name, doc, labels, counts in (
            ("gateway_placements", "Placement outcomes.", ["liveengine", "result"], s.placements),
            ("gateway_sessions_rejected", "Refused sessions by reason.", ["liveengine", "reason"], s.rejected),
        ):
            family = CounterMetricFamily(name, doc, labels=labels)
            for key, n in sorted(counts.items()):
                family.add_metric(list(key), n)
            yield family
        # `upstream`, not `pod`: Prometheus' pod discovery sets `pod` (the gateway's own) on every series
        failures = CounterMetricFamily("gateway_upstream_connect_failures", "Failed upstream connects by engine pod.",
                                       labels=["upstream"])
        for pod, n in sorted(s.connect_failures.items()):
            failures.add_metric([pod], n)
        yield failures
        frames = CounterMetricFamily("gateway_relay_frames", "Frames relayed.", labels=["direction"])
        frames.add_metric(["down"], s.frames_down)
        frames.add_metric(["up"], s.frames_up)
        yield frames
        yield CounterMetricFamily("gateway_redis_errors", "Redis errors.", value=s.redis_errors)
        fallback = CounterMetricFamily("gateway_placement_fallback", "Placements decided without Redis.",
                                       labels=["mode"])
        for mode, n in sorted(s.fallbacks.items()):
            fallback.add_metric([mode], n)
        yield fallback
        yield histogram("gateway_placement_duration_seconds", "Time to place and connect a session.",
                        s.placement_seconds)
