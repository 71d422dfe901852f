"""Real `liveplex serve --engine sim` processes on free ports, for the end-to-end checker tests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.support import pods

READY_S = pods.READY_S


@contextlib.contextmanager
def serve(*flags: str, log: Path) -> Iterator[str]:
    """Run `liveplex serve --engine sim FLAGS` on a free port; yields its `/v1` base URL."""
    with pods.subprocess_pod(*flags, log=log) as (running, _):
        yield running.base_url


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
