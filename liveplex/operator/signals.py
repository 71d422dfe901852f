"""The autoscaling signals (platform §8) as PromQL and metric names, written once.

The renderers (`render_hpa`, `render_scaledobject`), the chart's prometheus-adapter rules and
docs/deploy.md all read them here. Engine series carry `namespace` and `liveengine` (the
LiveEngine's name, relabelled from `app.kubernetes.io/instance` by the chart's PodMonitor);
gateway series carry `liveengine` as the pool key `<namespace>/<name>` (what the gateway knows).

- **Occupancy** (primary): sessions running plus sessions placed and not started, per pod, against
  `maxSessions × targetOccupancyPercent / 100`. A leading indicator: a reservation counts before
  its session starts.
- **Demand** (unmet): occupancy plus the gateways' `server_busy` and `no_engines` refusals over
  the last two minutes, against the same per-pod target. Occupancy saturates at 100 % when the
  pool is full and cannot say how many more pods are needed; refused starts can. They count
  attempts, not callers (a client may retry on the same socket), so they over-estimate: the
  `maxReplicas` cap and the slow scale-down bound the cost.
- **Lateness** (guard, not a trigger): p99 tick lateness drives `Degraded` and alerts; it lags
  (everyone on the pod already glitches), so it never scales.

Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.operator import names

OCCUPIED_METRIC = "liveengine_sessions_occupied"
"""Per-pod custom metric (prometheus-adapter `rules`): active + reserved sessions."""
DEMAND_METRIC = "liveengine_sessions_demand"
"""External metric (prometheus-adapter `externalRules`): occupied sessions + refused starts, per LiveEngine."""
REFUSED_REASONS = ("server_busy", "no_engines")
"""`gateway_sessions_rejected_total` reasons that mean "no room", not a client mistake."""
DEMAND_WINDOW = "2m"
LATENESS_WINDOW = "1m"


@dataclass(frozen=True, slots=True)
class Target:
    """One LiveEngine's label values in Prometheus."""

    namespace: str
    name: str

    @property
    def engine(self) -> str:
        return f'namespace="{self.namespace}",liveengine="{self.name}"'

    @property
    def gateway(self) -> str:
        refused = "|".join(REFUSED_REASONS)
        return f'liveengine="{names.pool(self.namespace, self.name)}",reason=~"{refused}"'


def occupied_query(t: Target) -> str:
    """Sessions held across the pool (active + reserved)."""
    return (f"sum(liveengine_sessions_active{{{t.engine}}}) "
            f"+ sum(liveengine_sessions_reserved{{{t.engine}}})")


def refused_query(t: Target) -> str:
    """Starts refused for want of room over the demand window; 0 when no gateway refused any."""
    return f"(sum(increase(gateway_sessions_rejected_total{{{t.gateway}}}[{DEMAND_WINDOW}])) or vector(0))"


def demand_query(t: Target) -> str:
    return f"{occupied_query(t)} + {refused_query(t)}"


def lateness_p99_query(t: Target) -> str:
    """The guard: p99 tick lateness in seconds (compare with `latenessBudgetMillis / 1000`)."""
    return (f"histogram_quantile(0.99, sum by (le) "
            f"(rate(liveengine_tick_lateness_seconds_bucket{{{t.engine}}}[{LATENESS_WINDOW}])))")


def late_tick_ratio_query(t: Target) -> str:
    return (f"sum(rate(liveengine_ticks_late_total{{{t.engine}}}[{LATENESS_WINDOW}])) "
            f"/ sum(rate(liveengine_ticks_total{{{t.engine}}}[{LATENESS_WINDOW}]))")


def per_pod_target_milli(max_sessions: int, target_percent: int) -> int:
    """Sessions per pod the autoscaler aims at, in thousandths (exact: no float in a Quantity)."""
    return max_sessions * target_percent * 10


def adapter_rules() -> dict[str, list[dict[str, object]]]:
    """prometheus-adapter rules: `OCCUPIED_METRIC` per pod (custom) and `DEMAND_METRIC` per LiveEngine
    (external, selected by `liveengine: <name>` in the HPA's namespace).

    The gateway labels its refusals with the pool key `<namespace>/<name>`; the demand rule splits
    it into `namespace` and `liveengine` with `label_replace`, so it joins the engines' series.
    """
    held = "liveengine_sessions_active{<<.LabelMatchers>>} + liveengine_sessions_reserved{<<.LabelMatchers>>}"
    occupied = f"sum by (namespace, liveengine) ({held})"
    reasons = "|".join(REFUSED_REASONS)
    refused = (
        "sum by (namespace, liveengine) (label_replace(label_replace(increase("
        f'gateway_sessions_rejected_total{{reason=~"{reasons}"}}[{DEMAND_WINDOW}]),'
        ' "namespace", "$1", "liveengine", "([^/]+)/.*"), "liveengine", "$1", "liveengine", "[^/]+/(.*)"))'
    )
    return {
        "rules": [{
            "seriesQuery": 'liveengine_sessions_active{namespace!="",pod!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "^liveengine_sessions_active$", "as": OCCUPIED_METRIC},
            "metricsQuery": f"sum by (<<.GroupBy>>) ({held})",
        }],
        "externalRules": [{
            "seriesQuery": 'liveengine_sessions_active{namespace!="",liveengine!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            "name": {"matches": "^liveengine_sessions_active$", "as": DEMAND_METRIC},
            "metricsQuery": f"{occupied} + ({refused} or {occupied} * 0)",
        }],
    }
