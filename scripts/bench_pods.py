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
level's figures the issue's targets read (`level.Level.as_dict`); stopped pods at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

READY_S = 120.0
"""A PersonaPlex pod measures its steps and prefill before it answers: allow for a loaded CPU."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Until `GET url` answers, or the pod exits or `READY_S` passes (then raise)."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"pod exited ({proc.returncode}) before it was ready: {url}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"pod not ready within {READY_S:.0f} s: {url}")


def main(argv: list[str]) -> int:
    split = argv.index("--") if "--" in argv else len(argv)
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--pod", action="append", required=True, help="NAME=SERVE FLAGS (repeat; run in this order)")
    p.add_argument("--rounds", type=int, default=2, help="times every pod is run (default: %(default)s)")
    p.add_argument("--out", required=True, help="JSON report path")
    a = p.parse_args(argv[:split])
    duplex = argv[split + 1:]
    pods: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-pods-"))
    runs: list[dict[str, object]] = []
    try:
        for spec in a.pod:
            name, _, flags = spec.partition("=")
            port = free_port()
            log = (work / f"{name}.log").open("wb")
            pods[name] = subprocess.Popen([sys.executable, "-m", "liveplex.cli", "serve", *shlex.split(flags),
                                           "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
            urls[name] = f"http://127.0.0.1:{port}/v1"
            wait_ready(f"{urls[name]}/models", pods[name])
        for round_ in range(a.rounds):
            for name, url in urls.items():
                out = work / f"{name}-{round_}.json"
                load = os.getloadavg()[0]
                subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "duplex", "--base-url", url,
                                "--server-pid", str(pods[name].pid), "--no-progress", "--out", str(out), *duplex],
                               check=False, stdout=subprocess.DEVNULL)
                levels = json.loads(out.read_text())["levels"]
                runs.append({"pod": name, "round": round_, "load": round(load, 2), "levels": levels})
                print(json.dumps({"pod": name, "round": round_, "load": round(load, 2),
                                  "server": levels[-1]["server"]}), flush=True)
    finally:
        for proc in pods.values():
            proc.terminate()
        for proc in pods.values():
            proc.wait(timeout=30)
    Path(a.out).write_text(json.dumps({"pods": dict(s.partition("=")[::2] for s in a.pod), "duplex": duplex,
                                       "logs": str(work), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
