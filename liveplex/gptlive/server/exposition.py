"""Prometheus text for a server's own collector: a registry per app, and `Buckets` as a histogram."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

from liveplex.live.buckets import Buckets

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _rows(buckets: Buckets) -> list[tuple[str, int]]:
    cumulative = buckets.cumulative()
    rows = [(repr(float(b)), c) for b, c in zip(buckets.bounds, cumulative)]
    rows.append(("+Inf", cumulative[-1]))
    return rows


def histogram(name: str, doc: str, buckets: Buckets) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, buckets=_rows(buckets), sum_value=buckets.total)


def histograms(name: str, doc: str, label: str, by: Mapping[str, Buckets]) -> HistogramMetricFamily:
    """One family, a histogram per value of `label`."""
    family = HistogramMetricFamily(name, doc, labels=[label])
    for value, buckets in sorted(by.items()):
        family.add_metric([value], _rows(buckets), buckets.total)
    return family


def registry(collector: Collector) -> CollectorRegistry:
    """A registry of its own (tests run several apps in one process)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def render(reg: CollectorRegistry) -> bytes:
    """The Prometheus text exposition."""
    return generate_latest(reg)
