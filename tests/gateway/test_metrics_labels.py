"""The gateway's exposition: one `liveplex_` namespace, never a label Prometheus' Kubernetes discovery sets itself."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from liveplex.gateway.metrics import GatewayCollector
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive.server.stats import FrontStats
from tests.support.exposition import misnamed


def test_connect_failures_are_labelled_by_upstream_and_no_label_collides() -> None:
    stats = GatewayStats()
    stats.connect_failures["pp-6d8f-abcde"] += 2
    registry = CollectorRegistry()
    registry.register(GatewayCollector(stats, FrontStats()))
    text = generate_latest(registry).decode()
    assert 'liveplex_gateway_upstream_connect_failures_total{upstream="pp-6d8f-abcde"} 2.0' in text
    assert misnamed(text) == []
    assert misnamed(text.replace("upstream=", "pod=")) == ["liveplex_gateway_upstream_connect_failures_total{pod}"]


def test_each_routed_pools_placements_and_refusals_are_exported_from_zero() -> None:
    """A counter first scraped with its first events in it loses them from every `rate()`: the
    alerts and the autoscaler's demand would miss the first refusals of a new pool."""
    registry = CollectorRegistry()
    registry.register(GatewayCollector(GatewayStats(), FrontStats(), lambda: ("voice/pp",)))
    text = generate_latest(registry).decode()
    for line in ('liveplex_gateway_placements_total{liveengine="voice/pp",result="busy"} 0.0',
                 'liveplex_gateway_sessions_rejected_total{liveengine="voice/pp",reason="server_busy"} 0.0',
                 'liveplex_gateway_sessions_active{liveengine="voice/pp"} 0.0'):
        assert line in text
