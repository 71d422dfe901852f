"""Real `liveplex serve --engine sim` processes on free ports, for the end-to-end checker tests."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from liveplex.conformance import cli as conformance
from tests.support import pods

READY_S = pods.READY_S


@contextlib.contextmanager
def serve(*flags: str, log: Path) -> Iterator[str]:
    """Run `liveplex serve --engine sim FLAGS` on a free port; yields its `/v1` base URL."""
    with pods.subprocess_pod(*flags, log=log) as (running, _):
        yield running.base_url


def check(base_url: str, *flags: str) -> tuple[int, list[str]]:
    """Run `liveplex check` against a server in this process (its `main`, as the command runs it,
    without a process's 1.8 CPU-s of imports, and the SDK's schemas built once per worker); its
    exit code and output lines. `check_process` is the command itself."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = conformance.main(["--base-url", base_url, *flags])
    return code, out.getvalue().splitlines()


def check_process(base_url: str, *flags: str) -> tuple[int, list[str]]:
    """Run the `liveplex check` command against a server; its exit code and output lines."""
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
