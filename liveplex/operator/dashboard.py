"""The Grafana dashboard a liveplex installation ships (JSON in the chart, for Grafana's sidecar),
written once as data: one LiveEngine's pool and its gateways.

`PANELS` lists each panel's queries with the dashboard's variable (`$liveengine`, the LiveEngine's
`<namespace>/<name>`) in their selectors; `queries(namespace, name)` gives the same queries with
values filled in, which is how a test evaluates every one against a real Prometheus. Label
conventions are `signals`'. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.operator import names, signals

UID = "liveplex-pool"
SELECTOR = f'{signals.LIVEENGINE_LABEL}="$liveengine"'
"""One LiveEngine's series, engine and gateway alike."""


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
        ("running", f"sum(liveplex_engine_sessions_active{{{SELECTOR}}})"),
        ("placed, not started", f"sum(liveplex_engine_sessions_reserved{{{SELECTOR}}})"),
        ("capacity", f"sum(liveplex_engine_session_capacity{{{SELECTOR}}})"),
    )),
    Panel("Starts refused for want of room", "reqps", (
        ("{{reason}}", f'sum by (reason) (rate(liveplex_gateway_sessions_rejected_total{{{SELECTOR},'
                       f'reason=~"{"|".join(signals.REFUSED_REASONS)}"}}[1m]))'),
    )),
    Panel("Tick lateness", "s", (
        ("p50", _quantile(0.5, "liveplex_engine_tick_lateness_seconds", SELECTOR)),
        ("p99", _quantile(0.99, "liveplex_engine_tick_lateness_seconds", SELECTOR)),
    )),
    Panel("Tick compute time", "s", (
        ("p50", _quantile(0.5, "liveplex_engine_tick_duration_seconds", SELECTOR)),
        ("p99", _quantile(0.99, "liveplex_engine_tick_duration_seconds", SELECTOR)),
    )),
    Panel("Time to first audio", "s", (
        ("pod p50", _quantile(0.5, "liveplex_engine_first_audio_seconds", SELECTOR)),
        ("pod p99", _quantile(0.99, "liveplex_engine_first_audio_seconds", SELECTOR)),
        ("through the gateway p99", _quantile(0.99, "liveplex_gateway_first_audio_seconds", "")),
        ("start through the gateway p99", _quantile(0.99, "liveplex_gateway_session_start_seconds", "")),
    )),
    Panel("Pods", "short", (
        ("{{pod}} sessions", f"sum by (pod) (liveplex_engine_sessions_active{{{SELECTOR}}})"),
        ("{{pod}} ready", f"max by (pod) (liveplex_engine_ready{{{SELECTOR}}})"),
        ("{{pod}} draining", f"max by (pod) (liveplex_engine_draining{{{SELECTOR}}})"),
    )),
    Panel("Late ticks per pod", "percentunit", (
        ("{{pod}}", f"sum by (pod) (rate(liveplex_engine_ticks_late_total{{{SELECTOR}}}[1m])) "
                    f"/ sum by (pod) (rate(liveplex_engine_ticks_total{{{SELECTOR}}}[1m]))"),
    )),
    Panel("Sessions by state (the idle pause)", "short", (
        ("active", f"sum(liveplex_engine_sessions_active{{{SELECTOR}}})"),
        ("{{state}}", f"sum by (state) (liveplex_engine_sessions_out{{{SELECTOR}}})"),
    )),
    Panel("Pauses, wakes and refused wakes", "ops", (
        ("pauses", f"sum(rate(liveplex_engine_pauses_total{{{SELECTOR}}}[1m]))"),
        ("wakes", f"sum(rate(liveplex_engine_wakes_total{{{SELECTOR}}}[1m]))"),
        ("refused wakes (must stay 0)", f"sum(rate(liveplex_engine_wakes_refused_total{{{SELECTOR}}}[1m]))"),
    )),
    Panel("Wake latency", "s", (
        ("p50", _quantile(0.5, "liveplex_engine_wake_latency_seconds", SELECTOR)),
        ("p99", _quantile(0.99, "liveplex_engine_wake_latency_seconds", SELECTOR)),
    )),
    Panel("Parked state in host memory", "bytes", (
        ("{{pod}}", f"sum by (pod) (liveplex_engine_parked_bytes{{{SELECTOR}}})"),
    )),
    Panel("Gateway placements", "reqps", (
        ("{{result}}", f"sum by (result) (rate(liveplex_gateway_placements_total{{{SELECTOR}}}[1m]))"),
    )),
    Panel("Gateways", "short", (
        ("open sockets", "sum(liveplex_gateway_sockets_open)"),
        ("relayed frames/s {{direction}}", "sum by (direction) (rate(liveplex_gateway_relay_frames_total[1m]))"),
        ("calls lost {{reason}}", "sum by (reason) (increase(liveplex_gateway_sessions_lost_total[5m]))"),
        ("loop stalls", "sum(increase(liveplex_gateway_loop_stalls_total[5m]))"),
        ("Redis errors/s", "sum(rate(liveplex_gateway_redis_errors_total[1m]))"),
    )),
)


def queries(namespace: str, name: str) -> list[str]:
    """Every query of the dashboard with its variables set to one LiveEngine."""
    return [q.replace("$liveengine", names.pool(namespace, name)) for panel in PANELS for _, q in panel.queries]


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
            variable(signals.LIVEENGINE_LABEL,
                     f"label_values(liveplex_engine_sessions_active, {signals.LIVEENGINE_LABEL})"),
        ]},
        "panels": panels,
    }
