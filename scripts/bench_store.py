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
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    py = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as work:
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
            gateways: dict[str, tuple[int, int, int]] = {}
            for name, extra in (("unstored", []), ("stored", ["--store-dir", str(Path(work) / "store")])):
                port, admin = free_port(), free_port()
                proc = subprocess.Popen([py, "-m", "liveplex.cli", "gateway", "--pool", "bench/pool",
                                         "--port", str(port), "--admin-port", str(admin), *extra],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(proc)
                _wait_ready(f"http://127.0.0.1:{admin}/ready")
                gateways[name] = (port, admin, proc.pid)
            ratios, per = [], {name: [] for name in gateways}
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
            stored = sum(f.stat().st_size for f in (Path(work) / "store").rglob("*") if f.is_file())
            print(json.dumps({
                "median_us_per_frame_pair": {n: round(statistics.median(v), 1) for n, v in per.items()},
                "ratios": [round(r, 3) for r in ratios], "median_ratio": round(statistics.median(ratios), 3),
                "stored_bytes": stored}))
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                proc.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
