"""How fast a fork starts: the fork socket's connect to its `session.started`, on a sim pod (issue 45
target: "a fork starts (SDP answer or `session.started`) within 1 s of its request on a sim pod";
docs/storage.md, docs/bench.md "Fork start").

One Redis, one sim pod and one gateway with a directory store (`--store-dir`, a temporary
directory), all subprocesses on loopback, stopped at the end. A stored call (`store: true`) runs
`--call-seconds` of loud audio in real time and ends (or, `--live`, goes on while the forks run);
then `--forks` forks of it, one after another, each a fresh `ws://.../v1/live/sessions/{id}/fork`
socket that sends `{"type": "session.start", "session": {}}` (the stored settings, the fork stored
too, as the stored session was) and closes once started. Each fork's time runs from just before
the socket's connect to its `session.started` (the gateway reads the stored meta and record, places
the fork, offers the record to the pod's resume route, dials it and relays its start); the socket's
first audio delta is timed too.

    .venv/bin/python scripts/bench_fork.py --forks 50

The report: one JSON line, milliseconds (p50, p99, max, n), and the record's size and chunks (the
gateway reads each chunk: a longer call, or a shorter `--flush-s`, has more).
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
from pathlib import Path

import numpy as np
import orjson
import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_pods import free_port  # noqa: E402
from bench_store import _wait_ready  # noqa: E402

LOUD = base64.b64encode((8000 * np.sin(np.arange(1920) * 0.2)).astype("<i2").tobytes()).decode()
APPEND = orjson.dumps({"type": "session.input_audio.append", "audio": LOUD}).decode()
STORED = orjson.dumps({"type": "session.start", "session": {"model": "gpt-live-1", "store": True}}).decode()
FORK = orjson.dumps({"type": "session.start", "session": {}}).decode()


async def _until(ws: websockets.ClientConnection, kind: str) -> None:
    async with asyncio.timeout(30):
        while (event := orjson.loads(await ws.recv()))["type"] != kind:
            if event["type"] == "error":
                raise SystemExit(f"error: {event}")


async def _stored_call(url: str, seconds: float, live: bool) -> tuple[str, websockets.ClientConnection | None]:
    """A stored call of `seconds` of loud audio in real time: its id, and its socket if `live`."""
    ws = await websockets.connect(url, max_queue=None)
    await ws.send(STORED)
    while (event := orjson.loads(await ws.recv()))["type"] != "session.started":
        pass
    session_id = event["session"]["id"]

    async def read() -> None:
        async for _ in ws:
            pass

    reader = asyncio.get_running_loop().create_task(read())
    t0 = time.monotonic()
    for i in range(int(seconds / 0.08)):
        await asyncio.sleep(max(0.0, t0 + i * 0.08 - time.monotonic()))
        await ws.send(APPEND)
    if live:
        return session_id, ws
    await ws.send('{"type":"session.close"}')
    await asyncio.wait_for(reader, 10)
    return session_id, None


async def _fork(url: str) -> tuple[float, float]:
    """One fork: seconds from before its connect to `session.started`, and to its first audio delta."""
    t0 = time.perf_counter()
    async with websockets.connect(url, max_queue=None) as ws:
        await ws.send(FORK)
        await _until(ws, "session.started")
        started = time.perf_counter() - t0
        await _until(ws, "session.output_audio.delta")
        audio = time.perf_counter() - t0
    return started, audio


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"p50": round(statistics.median(ms), 1), "p99": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 1),
            "max": round(ms[-1], 1), "n": len(ms)}


async def _bench(port: int, store: Path, args: argparse.Namespace) -> dict[str, object]:
    base = f"ws://127.0.0.1:{port}/v1/live/sessions"
    session_id, live = await _stored_call(base, args.call_seconds, args.live)
    await asyncio.sleep(args.flush_s * 3)  # what the call ran is in the store
    chunks = list((store / "sessions" / session_id / "record").glob("*.bin"))
    started, audio = [], []
    for _ in range(args.forks):
        s, a = await _fork(f"{base}/{session_id}/fork")
        started.append(s)
        audio.append(a)
        await asyncio.sleep(args.gap_s)
    if live is not None:
        await live.close()
    return {"connect_to_started_ms": _summary(started), "connect_to_first_audio_ms": _summary(audio),
            "record_bytes": sum(f.stat().st_size for f in chunks),
            "record_chunks": len(chunks), "stored_call_s": args.call_seconds, "live": args.live,
            "load": round(os.getloadavg()[0], 2)}


def _loopback(port: int, admin: int) -> list[str]:
    return ["--pool", "bench/pool", "--host", "127.0.0.1", "--port", str(port),
            "--admin-host", "127.0.0.1", "--admin-port", str(admin)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--call-seconds", type=float, default=5.0, help="the stored call's length")
    parser.add_argument("--live", action="store_true", help="fork the stored call while it runs")
    parser.add_argument("--flush-s", type=float, default=2.0, help="the gateway's --store-flush-s (its default)")
    parser.add_argument("--gap-s", type=float, default=0.1, help="pause between forks")
    args = parser.parse_args()
    py = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as work:
        store = Path(work) / "store"
        try:
            redis_port = free_port()
            procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                           "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL))
            env = {**os.environ, "LIVEPLEX_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"}
            pod_port, pod_admin = free_port(), free_port()
            procs.append(subprocess.Popen([py, "-m", "liveplex.cli", "serve", "--engine", "sim",
                                           *_loopback(pod_port, pod_admin), "--max-sessions", "50"],
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait_ready(f"http://127.0.0.1:{pod_admin}/ready")
            port, admin = free_port(), free_port()
            procs.append(subprocess.Popen([py, "-m", "liveplex.cli", "gateway", *_loopback(port, admin),
                                           "--store-dir", str(store), "--store-flush-s", str(args.flush_s)],
                                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait_ready(f"http://127.0.0.1:{admin}/ready")
            print(json.dumps(asyncio.run(_bench(port, store, args))))
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
