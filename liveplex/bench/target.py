"""The server under test, seen from the bench: its URLs, `/live/stats`, CPU time and process.

CPU is the server process's CPU-time clock (`clock_getcpuclockid`: every thread, nanoseconds;
`/proc/<pid>/stat` counts 10 ms ticks, and a light server over a 1 s level read 0), so it needs
the server's pid: either given (`--server-pid`) or known because the bench started the process
itself (`--serve-cmd`, and always for the baseline).
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import logging
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

import orjson

from liveplex.gptlive import urls

logger = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 5.0
"""Every HTTP call of the bench (models, stats, health) gives up after this."""

READY_TIMEOUT_S = 60.0
"""How long a server the bench started has to answer `GET /v1/models`."""

_LIBC = ctypes.CDLL(None, use_errno=True)


class TargetError(Exception):
    """The server under test cannot be reached or started."""


@dataclasses.dataclass(slots=True)
class Target:
    """One server the bench measures."""

    name: str
    """Label in tables and the report: "pod", "baseline-json", "baseline-raw"."""
    base_url: str
    """The SDK-style base URL, e.g. `http://127.0.0.1:8000/v1`."""
    pid: int | None = None
    """The server process, for CPU sampling; None when unknown."""
    process: subprocess.Popen[bytes] | None = None
    """Set when the bench started the server and must stop it."""
    stats_url: str | None = None
    """Another base URL whose `/live/stats` stands for this target's (the pod behind a gateway)."""

    @property
    def sessions_url(self) -> str:
        """The live socket under the base URL (the SDK's rule, `gptlive.urls`)."""
        return urls.ws_url(self.base_url)

    @property
    def root_url(self) -> str:
        """The server root: the base URL without its trailing `/v1`."""
        url = self.base_url.rstrip("/")
        return url.removesuffix("/v1")

    async def models(self) -> list[str]:
        """Model ids from `GET {base}/models`; raises `TargetError` if unreachable."""
        body = await asyncio.to_thread(_get_json, self.base_url.rstrip("/") + "/models")
        if not isinstance(body, dict):
            raise TargetError(f"{self.base_url}/models is not answering")
        return [str(m["id"]) for m in body.get("data", [])]

    async def stats(self) -> dict[str, object] | None:
        """`GET /live/stats` (of `stats_url` when set), or None when the server has none (the baseline)."""
        root = self.root_url if self.stats_url is None else self.stats_url.rstrip("/").removesuffix("/v1")
        body = await asyncio.to_thread(_get_json, root + "/live/stats")
        return body if isinstance(body, dict) else None

    async def config(self) -> dict[str, object] | None:
        """`GET /live/config`, or None when the server has none (the baseline)."""
        body = await asyncio.to_thread(_get_json, self.root_url + "/live/config")
        return body if isinstance(body, dict) else None

    def cpu_s(self) -> float | None:
        """The server's user + system CPU seconds so far, or None without a readable pid."""
        if self.pid is None:
            return None
        clock = ctypes.c_int()
        if _LIBC.clock_getcpuclockid(self.pid, ctypes.byref(clock)) != 0:
            return None
        try:
            return time.clock_gettime(clock.value)
        except OSError:  # the process is gone
            return None

    async def wait_ready(self) -> None:
        """Wait until the server answers `GET /v1/models`; raise `TargetError` if it exits or
        does not answer within `READY_TIMEOUT_S`."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise TargetError(f"{self.name} exited with code {self.process.returncode}")
            if await asyncio.to_thread(_get_json, self.base_url.rstrip("/") + "/models"):
                return
            await asyncio.sleep(0.2)
        raise TargetError(f"{self.name} did not answer {self.base_url}/models in {READY_TIMEOUT_S:g} s")

    def stop(self) -> None:
        """Terminate the server if the bench started it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(name: str, base_url: str, argv: list[str]) -> Target:
    """Start a server process from `argv` and return its target (not yet ready)."""
    logger.info("starting server", extra={"target": name, "argv": " ".join(argv)})
    try:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as exc:  # not found, not executable
        raise TargetError(f"cannot start the {name} with {argv[0]!r}: {exc.strerror}") from exc
    return Target(name, base_url, process.pid, process)


def start_shell(name: str, base_url: str, command: str) -> Target:
    """Start the pod from a `--serve-cmd` string (split like a shell, not run by one)."""
    return start(name, base_url, shlex.split(command))


def baseline_argv(variant: str, port: int) -> list[str]:
    """The command line of `liveplex bench baseline` on `port`, run by this interpreter."""
    return [sys.executable, "-m", "liveplex.cli", "bench", "baseline", "--variant", variant,
            "--port", str(port)]


def _get_json(url: str) -> object | None:
    """GET `url` and parse its JSON body; None on any HTTP, socket or JSON failure."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return orjson.loads(response.read())
    except (OSError, urllib.error.URLError, orjson.JSONDecodeError):
        return None
