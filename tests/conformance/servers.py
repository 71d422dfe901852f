"""Real `liveplex serve --engine sim` processes on free ports, for the end-to-end checker tests."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

READY_S = 30.0
"""How long a fresh server may take to answer /health on a loaded 2-core machine."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(root: str) -> bool:
    try:
        with urllib.request.urlopen(f"{root}/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def serve(*flags: str, log: Path) -> Iterator[str]:
    """Run `liveplex serve --engine sim FLAGS` on a free port; yields its `/v1` base URL."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "liveplex.cli", "serve", "--engine", "sim", "--host", "127.0.0.1",
             "--port", str(port), *flags],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + READY_S
            while not _healthy(root):  # readiness poll of a child process, not test synchronisation
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"liveplex serve {' '.join(flags)} did not start:\n{log.read_text()}")
                time.sleep(0.1)
            yield f"{root}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def check(base_url: str, *flags: str) -> tuple[int, list[str]]:
    """Run `liveplex check` against a server; its exit code and output lines."""
    done = subprocess.run([sys.executable, "-m", "liveplex.cli", "check", "--base-url", base_url, *flags],
                          capture_output=True, text=True, timeout=240)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def report(lines: list[str]) -> dict[int, str]:
    """Check number -> status word, from `liveplex check` output."""
    out = {}
    for line in lines:
        status, _, rest = line.partition(" ")
        if status in ("PASS", "FAIL", "SKIP") and rest.strip()[:2].strip().isdigit():
            out[int(rest.split()[0])] = status
    return out


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())
