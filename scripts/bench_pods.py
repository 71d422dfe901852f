"""Pods side by side: the same `liveplex bench duplex` run against each pod in turn, repeated.

A 2-core machine shared with others drifts by more than the differences worth measuring, so a
comparison is only fair when its pods run interleaved in one session: every pod is started once,
then each round runs the bench against pod 1, pod 2, ... in order, `--rounds` times, and every run
records the load average it started at. Used for issue 44's tick groups (docs/bench.md, "Tick groups
in PersonaPlex"):

    .venv/bin/python scripts/bench_pods.py --rounds 2 --out groups.json \\
        --pod "g1=--engine personaplex --model-path DIR --device cpu --tick-groups 1" \\
        --pod "auto=--engine personaplex --model-path DIR --device cpu --tick-groups 0" \\
        -- --sessions 2 --seconds 20

Each `--pod NAME=FLAGS` is `liveplex serve FLAGS --port P` (P free); everything after `--` goes to
every `bench duplex` run. The report: per run, the pod, the round, the load average, and the
level's figures the issue's targets read (`level.Level.as_dict`); stopped pods at the end. The
order alternates by round (1, 2 ... then ... 2, 1), so no pod always runs first.

`--gateway` puts each pod behind a gateway of its own, as a cluster serves it: one Redis, each pod
in a pool of its own (`bench/NAME`) with its gateway; the bench calls the gateway and reads the
pod's `/live/stats` and CPU. `--tick-sample-ms N` reads the pod's `last_tick_us` every N ms during
each run (a tick's compute, sampled: the pod's `tick_duration` histogram is too coarse for a sim's
sub-millisecond ticks), for each run's sampled tick p50 / p99. `--pod-path NAME=DIR` runs pod
NAME's code from DIR (a git worktree of another commit). The report ends with `summary`: for each
pod after the first, per figure, the rounds' ratios of that pod to the first, median and range
(issue 43's "no cost to calls that never pause", docs/bench.md):

    .venv/bin/python scripts/bench_pods.py --rounds 4 --gateway --tick-sample-ms 250 --out nocost.json \\
        --pod "off=--engine sim --max-sessions 200" \\
        --pod "pause3=--engine sim --max-sessions 200 --idle-pause-s 3" -- --sessions 25 --seconds 20 --echo-rtt
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

READY_S = 120.0
"""A PersonaPlex pod measures its steps and prefill before it answers: allow for a loaded CPU."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], listed: bool = False) -> None:
    """Until `GET url` answers (with `listed`, a model list that is not empty: a gateway that sees
    its pod), or the process exits or `READY_S` passes (then raise)."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pod exited ({proc.returncode}) before it was ready: {url}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if not listed or json.loads(r.read()).get("data"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"pod not ready within {READY_S:.0f} s: {url}")


def sample_ticks(stats_url: str, every_s: float, stop: threading.Event) -> list[int]:
    """`last_tick_us` of the pod at `stats_url`, read every `every_s` until `stop`, kept where a
    tick ran since the last read (the samples fill in a thread; read them once `stop` is set)."""
    got: list[int] = []

    def run() -> None:
        last = None
        while not stop.wait(every_s):
            try:
                with urllib.request.urlopen(stats_url, timeout=1) as r:
                    s = json.loads(r.read())
            except OSError:
                continue
            if last is not None and s["ticks"] != last:
                got.append(int(s["last_tick_us"]))
            last = s["ticks"]

    threading.Thread(target=run, daemon=True).start()
    return got


def figures(level: dict[str, object], ticks: list[int]) -> dict[str, float | None]:
    """What `summary` compares: the pod's CPU per frame pair, its tick (sampled p50 / p99, and the
    mean of every tick), the echo round trip (p50 / p99, raw and above its floor: `--echo-rtt`),
    the caller's lateness p99 and the pod's caller wait mean."""
    server = level["server"]
    assert isinstance(server, dict)
    above = level.get("echo_above_floor_ms") or {}
    assert isinstance(above, dict)
    rtt = level.get("echo_rtt_ms") or {}
    late = level.get("late_ms") or {}
    assert isinstance(rtt, dict) and isinstance(late, dict)
    q = statistics.quantiles(ticks, n=100, method="inclusive") if len(ticks) >= 2 else None
    return {
        "cpu_us_per_frame_pair": level.get("cpu_us_per_frame"),  # type: ignore[dict-item]
        "tick_p50_us": q[49] if q else None, "tick_p99_us": q[98] if q else None,
        "tick_mean_us": server["tick_busy_us"] / server["ticks"] if server.get("ticks") else None,
        "rtt_p50_ms": rtt.get("p50"), "rtt_p99_ms": rtt.get("p99"),
        "above_floor_p50_ms": above.get("p50"), "above_floor_p99_ms": above.get("p99"),
        "late_p99_ms": late.get("p99"),
        "caller_wait_mean_ms": (server["caller_wait_us"] / server["caller_wait_n"] / 1000
                                if server.get("caller_wait_n") else None),
    }


def summary(runs: list[dict[str, object]], names: list[str]) -> dict[str, dict[str, float]]:
    """Per figure, the rounds' ratios of pod `names[1]` to `names[0]`: median, least, most."""
    by = {(r["pod"], r["round"]): r["figures"] for r in runs}
    out: dict[str, dict[str, float]] = {}
    for figure in next(iter(by.values())):  # type: ignore[arg-type]
        ratios = []
        for round_ in sorted({r["round"] for r in runs}):  # type: ignore[type-var]
            a, b = by.get((names[0], round_)), by.get((names[1], round_))
            if a and b and a[figure] and b[figure] is not None:  # type: ignore[index]
                ratios.append(b[figure] / a[figure])  # type: ignore[index]
        if ratios:
            out[figure] = {"median": round(statistics.median(ratios), 3), "min": round(min(ratios), 3),
                           "max": round(max(ratios), 3), "rounds": len(ratios)}
    return out


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--pod", action="append", required=True, help="NAME=SERVE FLAGS (repeat; run in this order)")
    p.add_argument("--rounds", type=int, default=2, help="times every pod is run (default: %(default)s)")
    p.add_argument("--out", required=True, help="JSON report path")
    p.add_argument("--pod-path", action="append", default=[], metavar="NAME=DIR",
                   help="run pod NAME's liveplex from DIR (on PYTHONPATH: a git worktree of another commit)")
    p.add_argument("--gateway", action="store_true", help="each pod behind a gateway of its own (one Redis)")
    p.add_argument("--tick-sample-ms", type=int, default=0, help="read each pod's last tick every N ms (0: off)")
    a = p.parse_args(argv[:split])
    duplex = argv[split + 1:]
    paths = dict(spec.partition("=")[::2] for spec in a.pod_path)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the pods and gateways on the way out
    pods: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-pods-"))
    gateways: dict[str, str] = {}
    others: list[subprocess.Popen[bytes]] = []
    runs: list[dict[str, object]] = []
    try:
        redis = []
        if a.gateway:
            redis_port = free_port()
            others.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                                            "--appendonly", "no"], stdout=subprocess.DEVNULL))
            redis = ["--redis-url", f"redis://127.0.0.1:{redis_port}/0"]
        for spec in a.pod:
            name, _, flags = spec.partition("=")
            port = free_port()
            log = (work / f"{name}.log").open("wb")
            pool = ["--pool", f"bench/{name}"] if a.gateway else []
            env = {**os.environ, "PYTHONPATH": paths[name]} if name in paths else None
            pods[name] = subprocess.Popen([sys.executable, "-m", "liveplex.cli", "serve", *shlex.split(flags),
                                           "--port", str(port), *redis, *pool],
                                          stdout=log, stderr=subprocess.STDOUT, env=env,
                                          cwd=paths.get(name))
            urls[name] = f"http://127.0.0.1:{port}/v1"
            wait_ready(f"{urls[name]}/models", pods[name])
            if a.gateway:
                gport, glog = free_port(), (work / f"{name}-gateway.log").open("wb")
                gateway = subprocess.Popen([sys.executable, "-m", "liveplex.cli", "gateway", "--port", str(gport),
                                            *redis, *pool], stdout=glog, stderr=subprocess.STDOUT)
                others.append(gateway)
                gateways[name] = f"http://127.0.0.1:{gport}/v1"
                wait_ready(f"{gateways[name]}/models", gateway, listed=True)
        for round_ in range(a.rounds):
            for name in list(urls) if round_ % 2 == 0 else list(reversed(urls)):
                url = urls[name]
                out = work / f"{name}-{round_}.json"
                load = os.getloadavg()[0]
                stop = threading.Event()
                ticks = (sample_ticks(url.removesuffix("/v1") + "/live/stats", a.tick_sample_ms / 1000, stop)
                         if a.tick_sample_ms else [])
                via = ["--base-url", gateways[name], "--stats-url", url] if a.gateway else ["--base-url", url]
                subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "duplex", *via,
                                "--server-pid", str(pods[name].pid), "--no-progress", "--out", str(out), *duplex],
                               check=False, stdout=subprocess.DEVNULL)
                stop.set()
                levels = json.loads(out.read_text())["levels"]
                got = figures(levels[-1], list(ticks))
                runs.append({"pod": name, "round": round_, "load": round(load, 2), "levels": levels,
                             "tick_samples": len(ticks), "figures": got})
                print(json.dumps({"pod": name, "round": round_, "load": round(load, 2),
                                  "clean": levels[-1]["clean"], "client_limited": levels[-1]["client_limited"],
                                  "tick_samples": len(ticks), **{k: v if v is None else round(v, 2)
                                                                 for k, v in got.items()},
                                  "server": levels[-1]["server"]}), flush=True)
    finally:
        for proc in [*others[1:], *pods.values(), *others[:1]]:
            proc.terminate()
        for proc in [*others, *pods.values()]:
            proc.wait(timeout=30)
    report: dict[str, object] = {"pods": dict(s.partition("=")[::2] for s in a.pod), "duplex": duplex,
                                 "logs": str(work), "runs": runs}
    if len(urls) >= 2 and runs:  # each pod after the first against the first
        report["summary"] = {name: summary(runs, [next(iter(urls)), name]) for name in list(urls)[1:]}
        print(json.dumps({"summary": report["summary"]}), flush=True)
    Path(a.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
