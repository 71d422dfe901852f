"""The autoscaling signals (platform §8) as PromQL and metric names, written once.

The renderers (`render_hpa`, `render_scaledobject`), the chart's prometheus-adapter rules and
docs/deploy.md all read them here. Every series about a LiveEngine carries it as one label,
`liveengine="<namespace>/<name>"` (`LIVEENGINE_LABEL`): the gateway labels its series with the pool
key, which is exactly that, and the chart's PodMonitor relabels engine series to it from the pod's
namespace and `app.kubernetes.io/instance`. Engine series also carry `liveengine_name` (the bare
name) for one reader only: an HPA's metric selector, whose label values cannot hold a `/`.

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

LIVEENGINE_LABEL = "liveengine"
"""The label naming a LiveEngine as `<namespace>/<name>` on every liveplex series."""
SELECTOR_LABEL = "liveengine_name"
"""The bare LiveEngine name on engine series, for HPA metric selectors (no `/` in a label value)."""
OCCUPIED_METRIC = "liveplex_engine_sessions_occupied"
"""Per-pod custom metric (prometheus-adapter `rules`): active + reserved sessions."""
DEMAND_METRIC = "liveplex_engine_sessions_demand"
"""External metric (prometheus-adapter `externalRules`): occupied sessions + refused starts, per LiveEngine."""
REFUSED_REASONS = ("server_busy", "no_engines")
"""`liveplex_gateway_sessions_rejected_total` reasons that mean "no room", not a client mistake."""
DEMAND_WINDOW = "2m"
LATENESS_WINDOW = "1m"


@dataclass(frozen=True, slots=True)
class Target:
    """One LiveEngine's label values in Prometheus."""

    namespace: str
    name: str

    @property
    def engine(self) -> str:
        return f'{LIVEENGINE_LABEL}="{names.pool(self.namespace, self.name)}"'

    @property
    def gateway(self) -> str:
        refused = "|".join(REFUSED_REASONS)
        return f'{self.engine},reason=~"{refused}"'


def occupied_query(t: Target) -> str:
    """Sessions held across the pool (active + reserved)."""
    return (f"sum(liveplex_engine_sessions_active{{{t.engine}}}) "
            f"+ sum(liveplex_engine_sessions_reserved{{{t.engine}}})")


def refused_query(t: Target) -> str:
    """Starts refused for want of room over the demand window; 0 when no gateway refused any."""
    return f"(sum(increase(liveplex_gateway_sessions_rejected_total{{{t.gateway}}}[{DEMAND_WINDOW}])) or vector(0))"


def demand_query(t: Target) -> str:
    return f"{occupied_query(t)} + {refused_query(t)}"


def lateness_p99_query(t: Target) -> str:
    """The guard: p99 tick lateness in seconds (compare with `latenessBudgetMillis / 1000`)."""
    return (f"histogram_quantile(0.99, sum by (le) "
            f"(rate(liveplex_engine_tick_lateness_seconds_bucket{{{t.engine}}}[{LATENESS_WINDOW}])))")


def late_tick_ratio_query(t: Target) -> str:
    return (f"sum(rate(liveplex_engine_ticks_late_total{{{t.engine}}}[{LATENESS_WINDOW}])) "
            f"/ sum(rate(liveplex_engine_ticks_total{{{t.engine}}}[{LATENESS_WINDOW}]))")


def per_pod_target_milli(max_sessions: int, target_percent: int) -> int:
    """Sessions per pod the autoscaler aims at, in thousandths (exact: no float in a Quantity)."""
    return max_sessions * target_percent * 10


def adapter_rules() -> dict[str, list[dict[str, object]]]:
    """prometheus-adapter rules: `OCCUPIED_METRIC` per pod (custom) and `DEMAND_METRIC` per LiveEngine
    (external, selected by `liveengine_name: <name>` in the HPA's namespace).

    The adapter puts the HPA's selector into `<<.LabelMatchers>>` on the engine series; both sides of
    the sum are then grouped by `liveengine` (`<namespace>/<name>` on engine and gateway series
    alike), so the gateways' refusals join the engines' occupancy with no relabelling.
    """
    held = ("liveplex_engine_sessions_active{<<.LabelMatchers>>} "
            "+ liveplex_engine_sessions_reserved{<<.LabelMatchers>>}")
    occupied = f"sum by ({LIVEENGINE_LABEL}) ({held})"
    reasons = "|".join(REFUSED_REASONS)
    refused = (f"sum by ({LIVEENGINE_LABEL}) (increase("
               f'liveplex_gateway_sessions_rejected_total{{reason=~"{reasons}"}}[{DEMAND_WINDOW}]))')
    return {
        "rules": [{
            "seriesQuery": 'liveplex_engine_sessions_active{namespace!="",pod!=""}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
            "name": {"matches": "^liveplex_engine_sessions_active$", "as": OCCUPIED_METRIC},
            "metricsQuery": f"sum by (<<.GroupBy>>) ({held})",
        }],
        "externalRules": [{
            "seriesQuery": f'liveplex_engine_sessions_active{{namespace!="",{SELECTOR_LABEL}!=""}}',
            "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            "name": {"matches": "^liveplex_engine_sessions_active$", "as": DEMAND_METRIC},
            "metricsQuery": f"{occupied} + ({refused} or {occupied} * 0)",
        }],
    }
