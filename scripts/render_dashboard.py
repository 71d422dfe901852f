"""Render the shipped dashboard's panels from real data: docs/img/dashboard.png.

Starts a throwaway Redis, two sim pods (4 slots each), a gateway and Debian's Prometheus scraping
their admin ports (the labels the chart's PodMonitors give), drives `liveplex bench duplex`
through the gateway (10 callers for 8 slots, so refusals show), then draws every panel of
`liveplex/operator/dashboard.py` with matplotlib from Prometheus' `query_range`. Everything on
loopback; everything it started is stopped.

    .venv/bin/python scripts/render_dashboard.py [--out docs/img/dashboard.png]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402

from liveplex.operator import chart, dashboard  # noqa: E402
from liveplex.placement import LocalRedis, url  # noqa: E402

NAMESPACE, NAME = "voice", "sim"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on {port}")


def query_range(root: str, expr: str, start: float, end: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 2})
    with urllib.request.urlopen(f"{root}/api/v1/query_range?{params}", timeout=10) as response:
        return json.loads(response.read())["data"]["result"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img/dashboard.png"))
    args = parser.parse_args()
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        print("render_dashboard: needs Debian's prometheus (apt-get install prometheus)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="liveplex-dashboard-"))
    procs: list[subprocess.Popen[bytes]] = []
    with LocalRedis() as redis:
        env = {**os.environ, url.REDIS_URL_ENV: redis.url}
        cli = [sys.executable, "-m", "liveplex.cli"]
        try:
            pods = [(free_port(), free_port()) for _ in range(2)]
            for i, (port, admin) in enumerate(pods):
                procs.append(subprocess.Popen(
                    [*cli, "serve", "--port", str(port), "--admin-port", str(admin), "--max-sessions", "4",
                     "--pool", f"{NAMESPACE}/{NAME}", "--pod-name", f"{NAME}-{i}", "--log-level", "warning"],
                    env=env, stdout=subprocess.DEVNULL))
            gateway, gateway_admin = free_port(), free_port()
            procs.append(subprocess.Popen(
                [*cli, "gateway", "--port", str(gateway), "--admin-port", str(gateway_admin),
                 "--pool", f"{NAMESPACE}/{NAME}", "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL))
            rules = work / "rules.yaml"
            rules.write_text(chart.rule_file())
            scrape = [{"job_name": "engines", "static_configs": [
                {"targets": [f"127.0.0.1:{admin}"], "labels": {"namespace": NAMESPACE, "pod": f"{NAME}-{i}",
                                                                "liveengine": f"{NAMESPACE}/{NAME}",
                                                                "liveengine_name": NAME}}
                for i, (_, admin) in enumerate(pods)]},
                {"job_name": "gateways", "static_configs": [
                    {"targets": [f"127.0.0.1:{gateway_admin}"], "labels": {"namespace": NAMESPACE, "pod": "gw-0"}}]}]
            (work / "prometheus.yml").write_text(yaml.safe_dump(
                {"global": {"scrape_interval": "2s"}, "rule_files": [str(rules)], "scrape_configs": scrape}))
            port = free_port()
            procs.append(subprocess.Popen(
                [prometheus, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            for p, what in ((gateway, "the gateway"), (port, "prometheus")):
                wait_listening(p, what)
            time.sleep(5)
            start = time.time()
            # not clean by design (two callers refused): its report goes to stderr, its exit code is ignored
            bench = subprocess.run([*cli, "bench", "duplex", "--base-url", f"http://127.0.0.1:{gateway}/v1",
                                    "--sessions", "10", "--seconds", "30", "--no-progress"],
                                   env=env, capture_output=True, text=True, check=False)
            print(bench.stdout[-1500:], file=sys.stderr)
            time.sleep(10)
            end = time.time()
            draw(f"http://127.0.0.1:{port}", start - 5, end, args.out)
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
            shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {args.out}")
    return 0


def draw(root: str, start: float, end: float, out: Path) -> None:
    panels = dashboard.PANELS
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.1 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        for legend, expr in panel.queries:
            filled = expr.replace("$liveengine", f"{NAMESPACE}/{NAME}")
            for series in query_range(root, filled, start, end):
                times = [float(t) - start for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                label = legend
                for key, value in series["metric"].items():
                    label = label.replace("{{" + key + "}}", value)
                ax.plot(times, values, label=label, linewidth=1.2)
        ax.set_title(f"{panel.title} ({panel.unit})", fontsize=10)
        ax.set_xlabel("s", fontsize=8)
        ax.tick_params(labelsize=8)
        if ax.lines:
            ax.legend(fontsize=7, loc="upper left")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"liveplex: a LiveEngine pool ({NAMESPACE}/{NAME}: 2 sim pods x 4 slots; 10 bench callers "
                 "for 30 s through one gateway, 2 refused)", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)


if __name__ == "__main__":
    sys.exit(main())
