"""The Grafana dashboard a liveplex installation ships (JSON in the chart, for Grafana's sidecar),
written once as data: one LiveEngine's pool and its gateways.

`PANELS` lists each panel's queries with the dashboard's variables (`$namespace`, `$liveengine`)
in their selectors; `queries(namespace, name)` gives the same queries with values filled in, which is
how a test evaluates every one against a real Prometheus. Label conventions are `signals`'. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.operator import names, signals

UID = "liveplex-pool"
ENGINE = 'namespace="$namespace",liveengine="$liveengine"'
GATEWAY = 'liveengine="$namespace/$liveengine"'


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    unit: str
    """Grafana's unit id."""
    queries: tuple[tuple[str, str], ...]
    """(legend, PromQL) per line."""


def _quantile(q: float, metric: str, selector: str, by: str = "") -> str:
    return f"histogram_quantile({q}, sum by ({by}le) (rate({metric}_bucket{{{selector}}}[1m])))"


PANELS: tuple[Panel, ...] = (
    Panel("Sessions", "short", (
        ("running", f"sum(liveengine_sessions_active{{{ENGINE}}})"),
        ("placed, not started", f"sum(liveengine_sessions_reserved{{{ENGINE}}})"),
        ("capacity", f"sum(liveengine_session_capacity{{{ENGINE}}})"),
    )),
    Panel("Starts refused for want of room", "reqps", (
        ("{{reason}}", f'sum by (reason) (rate(gateway_sessions_rejected_total{{{GATEWAY},'
                       f'reason=~"{"|".join(signals.REFUSED_REASONS)}"}}[1m]))'),
    )),
    Panel("Tick lateness", "s", (
        ("p50", _quantile(0.5, "liveengine_tick_lateness_seconds", ENGINE)),
        ("p99", _quantile(0.99, "liveengine_tick_lateness_seconds", ENGINE)),
    )),
    Panel("Tick compute time", "s", (
        ("p50", _quantile(0.5, "liveengine_tick_duration_seconds", ENGINE)),
        ("p99", _quantile(0.99, "liveengine_tick_duration_seconds", ENGINE)),
    )),
    Panel("Time to first audio", "s", (
        ("pod p50", _quantile(0.5, "liveengine_first_audio_seconds", ENGINE)),
        ("pod p99", _quantile(0.99, "liveengine_first_audio_seconds", ENGINE)),
        ("through the gateway p99", _quantile(0.99, "gateway_first_audio_seconds", "")),
        ("start through the gateway p99", _quantile(0.99, "gateway_session_start_seconds", "")),
    )),
    Panel("Pods", "short", (
        ("{{pod}} sessions", f"sum by (pod) (liveengine_sessions_active{{{ENGINE}}})"),
        ("{{pod}} ready", f"max by (pod) (liveengine_ready{{{ENGINE}}})"),
        ("{{pod}} draining", f"max by (pod) (liveengine_draining{{{ENGINE}}})"),
    )),
    Panel("Late ticks per pod", "percentunit", (
        ("{{pod}}", f"sum by (pod) (rate(liveengine_ticks_late_total{{{ENGINE}}}[1m])) "
                    f"/ sum by (pod) (rate(liveengine_ticks_total{{{ENGINE}}}[1m]))"),
    )),
    Panel("Gateway placements", "reqps", (
        ("{{result}}", f"sum by (result) (rate(gateway_placements_total{{{GATEWAY}}}[1m]))"),
    )),
    Panel("Gateways", "short", (
        ("open sockets", "sum(gateway_sockets_open)"),
        ("relayed frames/s {{direction}}", "sum by (direction) (rate(gateway_relay_frames_total[1m]))"),
        ("calls lost {{reason}}", "sum by (reason) (increase(gateway_sessions_lost_total[5m]))"),
        ("loop stalls", "sum(increase(gateway_loop_stalls_total[5m]))"),
        ("Redis errors/s", "sum(rate(gateway_redis_errors_total[1m]))"),
    )),
)


def queries(namespace: str, name: str) -> list[str]:
    """Every query of the dashboard with its variables set to one LiveEngine."""
    return [q.replace("$namespace/$liveengine", names.pool(namespace, name))
            .replace("$namespace", namespace).replace("$liveengine", name)
            for panel in PANELS for _, q in panel.queries]


def dashboard() -> dict[str, object]:
    """The Grafana dashboard model (schema 39): a variable per label, a time series per panel."""
    def variable(label: str, query: str) -> dict[str, object]:
        return {"name": label, "label": label, "type": "query", "datasource": {"type": "prometheus",
                "uid": "${datasource}"}, "query": {"query": query, "refId": label}, "refresh": 2}

    panels = [{
        "id": i + 1, "type": "timeseries", "title": panel.title,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "targets": [{"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
                    for j, (legend, expr) in enumerate(panel.queries)],
    } for i, panel in enumerate(PANELS)]
    return {
        "uid": UID, "title": "liveplex: a LiveEngine pool", "schemaVersion": 39, "version": 1,
        "tags": ["liveplex"], "timezone": "browser", "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"},
            variable("namespace", "label_values(liveengine_sessions_active, namespace)"),
            variable("liveengine", 'label_values(liveengine_sessions_active{namespace="$namespace"}, liveengine)'),
        ]},
        "panels": panels,
    }
