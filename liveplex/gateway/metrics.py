"""Prometheus exposition of `GatewayStats` (platform §9's gateway names), read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from liveplex.gateway import relaying
from liveplex.gateway.stats import (
    FORK_RESULTS,
    HANGUP_RESULTS,
    PLACEMENT_RESULTS,
    REATTACH_RESULTS,
    ROOM_REFUSALS,
    STORED_RESULTS,
    GatewayStats,
)
from liveplex.gptlive.server.exposition import histogram
from liveplex.gptlive.server.stats import FrontStats

LOST_REASONS: dict[str, int] = dict.fromkeys(relaying.LOST_REASONS, 0)
"""Every way a session can be lost (a pod's failure, or a moved session no pod took), exported
from 0: a rate over a series that does not exist yet is no rate at all."""
MOVE_RESULTS: dict[str, int] = dict.fromkeys(relaying.MOVE_RESULTS, 0)


class GatewayCollector(Collector):
    """`pools`: the pools the gateway routes to now, whose per-pool series are exported from 0."""

    def __init__(self, stats: GatewayStats, front: FrontStats, pools: Callable[[], Iterable[str]] = tuple) -> None:
        self._stats = stats
        self._front = front
        self._pools = pools

    def collect(self) -> Iterator[Metric]:
        s = self._stats
        pools = tuple(self._pools())
        active = GaugeMetricFamily("liveplex_gateway_sessions_active", "Sessions being relayed.",
                                   labels=["liveengine"])
        for pool, n in sorted({**dict.fromkeys(pools, 0), **s.sessions_active}.items()):
            active.add_metric([pool], n)
        yield active
        yield GaugeMetricFamily("liveplex_gateway_sockets_open", "Open client WebSockets.",
                                value=self._front.sockets_open)
        yield histogram("liveplex_gateway_session_start_seconds",
                        "From session.start to the relayed session.started, placement included.",
                        self._front.start_seconds)
        yield histogram("liveplex_gateway_first_audio_seconds", "From session.start to the first relayed audio delta.",
                        self._front.first_audio_seconds)
        for name, doc, labels, counts in (
            ("liveplex_gateway_placements", "Placement outcomes.", ["liveengine", "result"],
             {**{(p, r): 0 for p in pools for r in PLACEMENT_RESULTS}, **s.placements}),
            ("liveplex_gateway_sessions_rejected", "Refused sessions by reason.", ["liveengine", "reason"],
             {**{(p, r): 0 for p in pools for r in ROOM_REFUSALS}, **s.rejected}),
            # `upstream`, not `pod`: Prometheus' pod discovery sets `pod` (the gateway's own) on every series
            ("liveplex_gateway_upstream_connect_failures", "Failed upstream connects by engine pod.", ["upstream"],
             s.connect_failures),
            ("liveplex_gateway_placement_fallback", "Placements decided without Redis.", ["mode"], s.fallbacks),
            ("liveplex_gateway_sessions_lost", "Relayed sessions whose pod failed them, by how.", ["reason"],
             {**LOST_REASONS, **s.sessions_lost}),
            ("liveplex_gateway_session_moves", "Sessions a draining pod asked to move, by result.", ["result"],
             {**MOVE_RESULTS, **s.moves}),
            ("liveplex_gateway_reattaches", "Callers re-attaching to a running session, by result.", ["result"],
             {**dict.fromkeys(REATTACH_RESULTS, 0), **s.reattaches}),
            ("liveplex_gateway_stored_sessions", "Stored calls whose storing ended, by result (failed: the store "
             "failed or fell behind, the call went on unstored).", ["result"],
             {**dict.fromkeys(STORED_RESULTS, 0), **s.stored}),
            ("liveplex_gateway_hangups", "Hangup requests, by result.", ["result"],
             {**dict.fromkeys(HANGUP_RESULTS, 0), **s.hangups}),
            ("liveplex_gateway_forks", "Forks of stored sessions, by result.", ["result"],
             {**dict.fromkeys(FORK_RESULTS, 0), **s.forks}),
        ):
            family = CounterMetricFamily(name, doc, labels=labels)
            for key, n in sorted(counts.items()):
                family.add_metric(list(key) if isinstance(key, tuple) else [key], n)
            yield family
        frames = CounterMetricFamily("liveplex_gateway_relay_frames", "Frames relayed.", labels=["direction"])
        frames.add_metric(["down"], s.frames_down)
        frames.add_metric(["up"], s.frames_up)
        yield frames
        yield CounterMetricFamily("liveplex_gateway_handed_back",
                                  "Relayed sessions left on their pods at this gateway's drain, to be re-attached.",
                                  value=s.handed_back)
        yield CounterMetricFamily("liveplex_gateway_redis_errors", "Redis errors.", value=s.redis_errors)
        yield CounterMetricFamily("liveplex_gateway_stored_bytes", "Bytes written for stored calls.",
                                  value=s.stored_bytes)
        yield histogram("liveplex_gateway_placement_duration_seconds", "Time to place and connect a session.",
                        s.placement_seconds)
        yield CounterMetricFamily("liveplex_gateway_loop_stalls",
                                  "Times the gateway's event loop was blocked over 100 ms.", value=s.loop_stalls)
