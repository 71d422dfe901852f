"""The shipped alerts and dashboard, proven on a real Prometheus (Debian's `prometheus` and
`promtool`, installed by scripts/test): every alert fires on synthetic series (`promtool test
rules`), and every alert signal and every dashboard query returns series while Prometheus scrapes
real sim pods and a gateway under load, the idle pause's panels numbers from a call that paused
and woke."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import websockets
import yaml

from liveplex.operator import alerts, chart, dashboard, metrics
from tests.pod.test_pause import SILENCE, speech, stream
from tests.support import platform, pods
from tests.support.clients import START, started, until

pytestmark = pytest.mark.timeout(180)

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
LABELS = {"namespace": "ns", "liveengine": "ns/pp", "liveengine_name": "pp", "pod": "pod-1"}
"""One engine pod's target labels in the synthetic series."""
GATEWAY = {"namespace": "ns", "pod": "gw-1"}
OPERATOR = {"namespace": "ns", "pod": "op-1"}

SERIES: dict[str, list[tuple[str, dict[str, str], str]]] = {
    "LiveplexTickLatenessOverBudget": [
        ("liveplex_engine_tick_lateness_seconds_bucket", {**LABELS, "le": "0.01"}, "0+0x30"),
        ("liveplex_engine_tick_lateness_seconds_bucket", {**LABELS, "le": "0.05"}, "0+750x30"),
        ("liveplex_engine_tick_lateness_seconds_bucket", {**LABELS, "le": "+Inf"}, "0+750x30")],
    "LiveplexSessionsRefused": [
        ("liveplex_gateway_placements_total", {"liveengine": "ns/pp", "result": "busy"}, "0+10x30"),
        ("liveplex_gateway_placements_total", {"liveengine": "ns/pp", "result": "placed"}, "0+10x30"),
        ("liveplex_gateway_sessions_active", {"liveengine": "ns/pp"}, "5x30")],
    "LiveplexNoEngines": [
        ("liveplex_gateway_sessions_rejected_total", {"liveengine": "ns/pp", "reason": "no_engines"}, "0+1x30"),
        ("liveplex_gateway_sessions_active", {"liveengine": "ns/pp"}, "0x30")],
    "LiveplexRedisUnreachable": [("liveplex_gateway_redis_errors_total", GATEWAY, "0+5x30")],
    "LiveplexUpstreamConnectFailures": [
        ("liveplex_gateway_upstream_connect_failures_total", {**GATEWAY, "upstream": "pod-1"}, "0+1x30"),
        ("liveplex_gateway_sockets_open", GATEWAY, "3x30")],
    "LiveplexSessionsLost": [("liveplex_gateway_sessions_lost_total", {**GATEWAY, "reason": "silent"}, "0+1x30")],
    "LiveplexGatewayLoopStalls": [("liveplex_gateway_loop_stalls_total", GATEWAY, "0+1x30")],
    "LiveplexParkedCallsUnclaimed": [
        ("liveplex_engine_parked_ended_total", {**LABELS, "reason": "window_passed"}, "0+1x30"),
        ("liveplex_engine_reattaches_total", {**LABELS, "result": "parked"}, "0+0x30")],
    "LiveplexWakesRefused": [
        ("liveplex_engine_wakes_refused_total", LABELS, "0+0x10 1+0x20"),
        ("liveplex_engine_wakes_refused_total", {**LABELS, "pod": "pod-2"}, "0+0x30")],
    "LiveplexOperatorReconcileFailing": [
        ("liveplex_operator_reconciles_total", {**OPERATOR, "handler": "reconcile", "outcome": "retry"}, "0+2x30"),
        ("liveplex_operator_reconciles_total", {**OPERATOR, "handler": "reconcile", "outcome": "ok"}, "0+5x30")],
    "LiveplexOperatorNoLeader": [
        ("liveplex_operator_leader", OPERATOR, "0x30"),
        ("liveplex_operator_leader", {**OPERATOR, "pod": "op-2"}, "0x30")],
}
"""Per alert, series that must fire it (and only it): (metric, labels, promtool's values)."""
SERIES["LiveplexPodDegraded"] = SERIES["LiveplexTickLatenessOverBudget"]
FIRED_WITH = {"LiveplexTickLatenessOverBudget": {"liveengine": "ns/pp"},
              "LiveplexPodDegraded": {"liveengine": "ns/pp", "pod": "pod-1"},
              "LiveplexSessionsRefused": {"liveengine": "ns/pp"},
              "LiveplexNoEngines": {"liveengine": "ns/pp"}, "LiveplexRedisUnreachable": GATEWAY,
              "LiveplexUpstreamConnectFailures": GATEWAY, "LiveplexSessionsLost": {**GATEWAY, "reason": "silent"},
              "LiveplexGatewayLoopStalls": GATEWAY, "LiveplexParkedCallsUnclaimed": {"liveengine": "ns/pp"},
              "LiveplexWakesRefused": {"liveengine": "ns/pp", "pod": "pod-1"},
              "LiveplexOperatorReconcileFailing": OPERATOR,
              "LiveplexOperatorNoLeader": {}}


def _selector(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def _annotations(alert: alerts.Alert, labels: dict[str, str]) -> dict[str, str]:
    """The alert's annotations as Prometheus renders them for `labels`."""
    def fill(text: str) -> str:
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
    return {"summary": fill(alert.summary), "action": alert.action}


def test_every_alert_fires_on_its_synthetic_series(tmp_path: Path) -> None:
    assert PROMTOOL, "promtool is Debian's prometheus package (scripts/test installs it)"
    rules = tmp_path / "rules.yaml"
    rules.write_text(chart.rule_file())
    assert set(SERIES) == {a.name for a in alerts.ALERTS}, "every alert has its test series"
    tests = []
    for alert in alerts.ALERTS:
        labels = {**FIRED_WITH[alert.name], "severity": alert.severity}
        tests.append({
            "interval": "1m",
            "input_series": [{"series": _selector(m, lab), "values": v} for m, lab, v in SERIES[alert.name]],
            "alert_rule_test": [{"eval_time": "20m", "alertname": alert.name, "exp_alerts": [
                {"exp_labels": labels, "exp_annotations": _annotations(alert, labels)}]}],
        })
    spec = tmp_path / "alerts_test.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}))
    done = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _query(root: str, expr: str) -> list[dict]:
    url = f"{root}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


@contextlib.contextmanager
def _operator_endpoint() -> Iterator[str]:
    """An operator replica's `/metrics` as the operator serves it (`metrics.serve`, its collector),
    leading and having run one reconcile: the operator's series without a cluster to reconcile."""
    loop = asyncio.new_event_loop()
    state = metrics.OperatorMetrics(leader=True)
    state.observe("reconcile", None, 0.01)
    runner = loop.run_until_complete(metrics.serve(state, "127.0.0.1", 0))
    host, port = runner.addresses[0][:2]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"{host}:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_every_dashboard_query_and_alert_signal_returns_series_from_real_pods(redis_url: str, tmp_path: Path) -> None:
    assert PROMETHEUS, "prometheus is Debian's prometheus package (scripts/test installs it)"
    with platform.platform(redis_url, tmp_path, pod_flags=("--max-sessions", "1", "--idle-pause-s", "1")) as p, \
            _operator_endpoint() as operator:
        rules = tmp_path / "rules.yaml"
        rules.write_text(chart.rule_file())
        engines = [pod.admin_address for pod, _ in p.pods]
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": [str(rules)],
                  "scrape_configs": [
                      {"job_name": "engines", "static_configs": [
                          # what the chart's PodMonitor relabels engine series to
                          {"targets": [a], "labels": {"namespace": "test", "liveengine": "test/pool",
                                                      "liveengine_name": "pool", "pod": f"pod-{i}"}}
                          for i, a in enumerate(engines)]},
                      {"job_name": "gateways", "static_configs": [
                          {"targets": [p.gateway.admin_address], "labels": {"namespace": "test", "pod": "gw-0"}}]},
                      {"job_name": "operators", "static_configs": [
                          {"targets": [operator], "labels": {"namespace": "test", "pod": "op-0"}}]}]}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = pods.free_port()
        server = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "prometheus.log", "wb"))  # noqa: SIM115
        root = f"http://127.0.0.1:{port}"
        try:
            async def load() -> None:
                """Both pods' one slot taken, one start refused for want of room, 6 s of calls (that
                send no audio: never paused); then a caller silent past the idle timeout who speaks."""
                calls = []
                for _ in range(2):
                    ws = await websockets.connect(p.gateway.ws_url, max_queue=None)
                    await ws.send(orjson.dumps(START).decode())
                    await until(ws, "session.started")
                    calls.append(ws)
                refused = await websockets.connect(p.gateway.ws_url)
                await refused.send(orjson.dumps(START).decode())
                error, _ = await until(refused, "error")
                assert error["error"]["code"] == "server_busy"
                await asyncio.sleep(6)
                for ws in (*calls, refused):
                    await ws.close()
                first = p.pods[0][0]  # straight to a pod whose slot is free again
                await asyncio.to_thread(platform.eventually, lambda: p.pod_sessions()[0] == 0, "a free slot")
                quiet, _ = await started(first.ws_url)
                async with quiet:
                    sender = asyncio.create_task(stream(quiet, [SILENCE] * 20 + speech()))
                    await until(quiet, "session.resumed")
                    sender.cancel()
            asyncio.run(load())
            platform.eventually(lambda: all(t["health"] == "up" for t in json.loads(urllib.request.urlopen(
                f"{root}/api/v1/targets", timeout=5).read())["data"]["activeTargets"]), "every target scraped", 30)
            time.sleep(3)  # a few scrapes after the load, so every rate has two samples
            empty = [q for q in dashboard.queries("test", "pool") if not _query(root, q)]
            assert empty == [], f"dashboard queries without series: {empty}"
            pause = [q for q in dashboard.queries("test", "pool")
                     if re.search(r"liveplex_engine_(sessions_out|pauses|wakes|parked_bytes|wake_latency)", q)]
            assert len(pause) == 7
            not_numbers = [q for q in pause if not all(math.isfinite(float(r["value"][1])) for r in _query(root, q))]
            assert not_numbers == [], f"the idle pause's panels without a number: {not_numbers}"
            silent = [a.name for a in alerts.ALERTS if not _query(root, a.signal)]
            assert silent == [], f"alert signals without series: {silent}"
            rule_groups = json.loads(urllib.request.urlopen(f"{root}/api/v1/rules", timeout=5).read())
            loaded = {r["name"] for g in rule_groups["data"]["groups"] for r in g["rules"]}
            assert loaded == {a.name for a in alerts.ALERTS}
            assert all(r["health"] == "ok" for g in rule_groups["data"]["groups"] for r in g["rules"])
        finally:
            server.terminate()
            server.wait(10)


def test_every_metric_and_alert_has_its_row_in_docs_observability() -> None:
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "observability.md").read_text()
    sources = [root / "liveplex" / "pod" / "metrics.py", root / "liveplex" / "gateway" / "metrics.py"]
    emitted = {m for path in sources for m in re.findall(r'"(liveplex_(?:engine|gateway)_[a-z_]+)"', path.read_text())}
    assert emitted and not [m for m in emitted if m not in doc]
    assert not [a.name for a in alerts.ALERTS if f"| `{a.name}` | {a.severity} |" not in doc]
