"""What storing a call costs its gateway: CPU per frame pair for stored calls (`store: true`)
against unstored ones, side by side (issue 45; docs/storage.md, "What it costs").

One Redis, one sim pod, and two gateways in front of it that differ only in what their calls ask
for: each round runs `--calls` real-time calls for `--seconds` through gateway U with
`store: false` and, at the same time, as many through gateway S (`--store-dir`, a temporary
directory) with `store: true`, and reads each gateway's process CPU (user + system, its writer
threads included) and the audio deltas it relayed
(`liveplex_gateway_relay_frames_total{direction="down"}`): CPU per frame pair = CPU seconds /
deltas, as `scripts/bench-gateway` reports it. Side by side in time, not in turn: a shared 2-core
machine's load drifts more than the difference between runs a minute apart, and both gateways then
run under the same load. The figure is the median of the rounds' ratios.

    .venv/bin/python scripts/bench_store.py --rounds 5 --calls 20 --seconds 10

Each caller sends 20 ms appends of a loud tone in real time and reads everything; the report is
one JSON line per run and the medians.

What a stored call's caller hears (the issue's "round trip and lateness within noise"): with
arguments after `--`, each round instead runs `liveplex bench duplex` with them through each
gateway in turn (`--store` through gateway S; `--stats-url` the pod, `--server-pid` the gateway,
so its CPU per frame pair comes too), the order alternating round by round so neither always runs
first, and reports each run's round trip, lateness and started figures and the rounds' ratios:

    .venv/bin/python scripts/bench_store.py --rounds 6 -- --sessions 20 --seconds 20 --echo-rtt
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pods import free_port  # noqa: E402

CHUNK = base64.b64encode((8000 * np.sin(np.arange(480) * 0.2)).astype("<i2").tobytes()).decode()
APPEND = orjson.dumps({"type": "session.input_audio.append", "audio": CHUNK}).decode()


def _wait_ready(url: str) -> None:
    for _ in range(600):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"not ready: {url}")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _deltas(admin: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
    return next(float(line.split()[-1]) for line in text.splitlines()
                if line.startswith('liveplex_gateway_relay_frames_total{direction="down"}'))


async def _call(port: int, store: bool, seconds: float) -> None:
    async with websockets.connect(f"ws://127.0.0.1:{port}/v1/live/sessions", max_queue=None) as ws:
        await ws.send(orjson.dumps({"type": "session.start",
                                    "session": {"model": "gpt-live-1", "store": store}}).decode())
        while orjson.loads(await ws.recv())["type"] != "session.started":
            pass

        async def read() -> None:
            async for _ in ws:
                pass

        reader = asyncio.get_running_loop().create_task(read())
        t0 = time.monotonic()
        for i in range(int(seconds / 0.02)):
            await asyncio.sleep(max(0.0, t0 + i * 0.02 - time.monotonic()))
            await ws.send(APPEND)
        await ws.send('{"type":"session.close"}')
        await asyncio.wait_for(reader, 10)


async def _run(port: int, store: bool, calls: int, seconds: float) -> None:
    async with asyncio.TaskGroup() as group:
        for _ in range(calls):
            group.create_task(_call(port, store, seconds))
            await asyncio.sleep(0.02)


async def _together(targets: list[tuple[int, bool]], calls: int, seconds: float) -> None:
    """`calls` calls through each (port, store) target at once."""
    await asyncio.gather(*(_run(port, store, calls, seconds) for port, store in targets))


FIGURES = {
    "echo_rtt_p50_ms": ("echo_rtt_ms", "p50"), "echo_rtt_p99_ms": ("echo_rtt_ms", "p99"),
    "late_p50_ms": ("late_ms", "p50"), "late_p99_ms": ("late_ms", "p99"), "late_max_ms": ("late_ms", "max"),
    "started_p50_ms": ("started_ms", "p50"), "send_late_p99_ms": ("send_late_ms", "p99"),
}
"""The caller's figures of a `bench duplex` level each run reports: (summary, percentile)."""

Gateways = dict[str, tuple[int, int, int]]
"""Per gateway name (`unstored`, `stored`): its port, admin port and pid."""


@contextlib.contextmanager
def _platform(work: Path, store_flags: list[str]) -> Iterator[tuple[int, Gateways]]:
    """Redis, one sim pod and the two gateways, stopped at the end: the pod's port, the gateways."""
    py = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    try:
        redis_port = free_port()
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly",
                                       "no"], stdout=subprocess.DEVNULL))
        env = {**os.environ, "LIVEPLEX_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"}
        pod_port, pod_admin = free_port(), free_port()
        procs.append(subprocess.Popen([py, "-m", "liveplex.cli", "serve", "--engine", "sim", "--pool", "bench/pool",
                                       "--port", str(pod_port), "--admin-port", str(pod_admin),
                                       "--max-sessions", "400"], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        _wait_ready(f"http://127.0.0.1:{pod_admin}/ready")
        gateways: Gateways = {}
        for name, extra in (("unstored", []), ("stored", ["--store-dir", str(work / "store"), *store_flags])):
            port, admin = free_port(), free_port()
            proc = subprocess.Popen([py, "-m", "liveplex.cli", "gateway", "--pool", "bench/pool",
                                     "--port", str(port), "--admin-port", str(admin), *extra],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(proc)
            _wait_ready(f"http://127.0.0.1:{admin}/ready")
            gateways[name] = (port, admin, proc.pid)
        yield pod_port, gateways
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(10)


def _cpu_rounds(args: argparse.Namespace, gateways: Gateways, work: Path) -> None:
    """Stored and unstored calls at once through their gateways, round after round: CPU per frame pair."""
    ratios: list[float] = []
    per: dict[str, list[float]] = {name: [] for name in gateways}
    for round_ in range(args.rounds):
        before = {name: (_cpu_s(pid), _deltas(admin)) for name, (_, admin, pid) in gateways.items()}
        asyncio.run(_together([(port, name == "stored") for name, (port, _, _) in gateways.items()],
                              args.calls, args.seconds))
        time.sleep(1.0)  # the stored calls' last writes
        got: dict[str, float] = {}
        for name, (_, admin, pid) in gateways.items():
            cpu, deltas = before[name]
            pairs = _deltas(admin) - deltas
            got[name] = (_cpu_s(pid) - cpu) / pairs * 1e6
            per[name].append(got[name])
            print(json.dumps({"round": round_, "gateway": name, "us_per_frame_pair": round(got[name], 1),
                              "frame_pairs": pairs, "load": os.getloadavg()[0]}), flush=True)
        ratios.append(got["stored"] / got["unstored"])
    stored = sum(f.stat().st_size for f in (work / "store").rglob("*") if f.is_file())
    print(json.dumps({
        "median_us_per_frame_pair": {n: round(statistics.median(v), 1) for n, v in per.items()},
        "ratios": [round(r, 3) for r in ratios], "median_ratio": round(statistics.median(ratios), 3),
        "stored_bytes": stored}))


def _duplex_figures(level: dict[str, Any]) -> dict[str, float | None]:
    """A level's caller figures (`FIGURES`), above-floor round trip and gateway CPU per frame pair."""
    figures: dict[str, float | None] = {name: level[summary][rank] for name, (summary, rank) in FIGURES.items()}
    above = level.get("echo_above_floor_ms") or {}
    figures["above_floor_p50_ms"], figures["above_floor_p99_ms"] = above.get("p50"), above.get("p99")
    figures["gateway_us_per_frame_pair"] = level.get("cpu_us_per_frame")
    return figures


def _duplex_rounds(args: argparse.Namespace, duplex: list[str], pod_port: int, gateways: Gateways,
                   work: Path) -> None:
    """`bench duplex` through each gateway in turn, the order alternating by round: per run its
    figures, then per figure the rounds' stored - unstored differences and stored / unstored
    ratios, each's median and range (a ratio only where unstored is not 0: lateness often is)."""
    runs: dict[str, list[dict[str, float | None]]] = {name: [] for name in gateways}
    for round_ in range(args.rounds):
        for name in list(gateways) if round_ % 2 == 0 else list(reversed(gateways)):
            port, _, pid = gateways[name]
            out = work / f"{name}-{round_}.json"
            load = os.getloadavg()[0]
            subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "duplex",
                            "--base-url", f"http://127.0.0.1:{port}/v1", "--stats-url",
                            f"http://127.0.0.1:{pod_port}/v1", "--server-pid", str(pid), "--no-progress",
                            "--out", str(out), *(["--store"] if name == "stored" else []), *duplex],
                           check=False, stdout=subprocess.DEVNULL)
            level = json.loads(out.read_text())["levels"][-1]
            figures = _duplex_figures(level)
            runs[name].append(figures)
            print(json.dumps({"round": round_, "gateway": name, "load": round(load, 2), "clean": level["clean"],
                              "failed": level["failed"], "client_limited": level["client_limited"], **figures}),
                  flush=True)
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for figure in runs["stored"][0]:
        both = ((s[figure], u[figure]) for s, u in zip(runs["stored"], runs["unstored"], strict=True))
        pairs = [(s, u) for s, u in both if s is not None and u is not None]
        summary[figure] = {what: _spread(values) for what, values in (
            ("difference", [s - u for s, u in pairs]), ("ratio", [s / u for s, u in pairs if u])) if values}
    print(json.dumps(summary))


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def main() -> int:
    split = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--store-flags", default="", help="more flags for the storing gateway, e.g. "
                        "'--store-flush-s 10' (what a flush's fixed cost is)")
    args = parser.parse_args(sys.argv[1:split])
    duplex = sys.argv[split + 1:]
    with tempfile.TemporaryDirectory() as work, _platform(Path(work), args.store_flags.split()) as (pod_port, gateways):
        if duplex:
            _duplex_rounds(args, duplex, pod_port, gateways, Path(work))
        else:
            _cpu_rounds(args, gateways, Path(work))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
