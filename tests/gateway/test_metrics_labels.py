"""The gateway's exposition never uses a label Prometheus' Kubernetes discovery sets itself."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from liveplex.gateway.metrics import GatewayCollector
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive.server.stats import FrontStats

TARGET_LABELS = {"pod", "namespace", "container", "instance", "job", "service", "endpoint"}
"""What a PodMonitor/ServiceMonitor scrape attaches: a series' own label of that name is renamed
`exported_<name>` (honorLabels false) or overwrites the target's (honorLabels true)."""


def test_connect_failures_are_labelled_by_upstream_and_no_label_collides() -> None:
    stats = GatewayStats()
    stats.connect_failures["pp-6d8f-abcde"] += 2
    registry = CollectorRegistry()
    registry.register(GatewayCollector(stats, FrontStats()))
    text = generate_latest(registry).decode()
    assert 'gateway_upstream_connect_failures_total{upstream="pp-6d8f-abcde"} 2.0' in text
    labels = {name for family in registry.collect() for sample in family.samples for name in sample.labels}
    assert labels and not labels & TARGET_LABELS
