"""Pods for tests, built through the real `serve.build_pod` path: in process on this loop, or as a
`liveplex serve` subprocess. Neither polls for readiness: the in-process pod's socket is bound
and listening before the server starts; the subprocess announces its address on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from liveplex import serve
from liveplex.gptlive.server import run
from liveplex.live import runner

LIVEPLEX = (sys.executable, "-m", "liveplex.cli")
"""The `liveplex` command of the suite's own venv."""

READY_S = 60.0
"""How long a fresh subprocess may take to announce itself on a loaded 2-core machine."""


@dataclass(frozen=True, slots=True)
class Running:
    """A running pod: its `host:port`, its admin listener's, the built pod (in process only) and
    its URLs."""

    address: str
    admin_address: str = ""
    built: serve.Built | None = None

    @property
    def root(self) -> str:
        return f"http://{self.address}"

    @property
    def admin_root(self) -> str:
        return f"http://{self.admin_address}"

    @property
    def base_url(self) -> str:
        """What the SDK takes as `base_url`."""
        return f"{self.root}/v1"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.address}/v1/live/sessions"


def free_port() -> int:
    """A port nothing listens on (for a refused-connection test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Announcing(uvicorn.Server):
    """Sets `up` once started (after the lifespan ran: the engine thread is up)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.up = asyncio.Event()

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[override]
        await super().startup(sockets)
        self.up.set()


@contextlib.asynccontextmanager
async def in_process(*flags: str, engine: runner.EngineFactory | None = None,
                     ws: type | str = run.WS_PROTOCOL) -> AsyncIterator[Running]:
    """`liveplex serve --engine sim FLAGS` on this loop (`engine` replaces the sim)."""
    built = serve.build_pod(serve.build_parser().parse_args(["--engine", "sim", *flags]), engine)
    sockets = run.listeners(built.pod.front, "127.0.0.1", 0)
    server = _Announcing(run.config(built.app, built.pod.front.settings, ws=ws))
    task = asyncio.create_task(server.serve(sockets=sockets))
    try:
        async with asyncio.timeout(READY_S):
            await asyncio.wait({task, asyncio.ensure_future(server.up.wait())},
                               return_when=asyncio.FIRST_COMPLETED)
        if not server.started:
            raise RuntimeError("the in-process pod did not start")
        yield Running(*(f"127.0.0.1:{sock.getsockname()[1]}" for sock in sockets), built=built)
    finally:
        server.should_exit = True
        await task
        for sock in sockets:
            sock.close()


def _announced(proc: subprocess.Popen[bytes], log: Path, found: list[str], ready: threading.Event) -> None:
    """Copy the child's output to `log`; note the addresses of its `GPT-Live ws://...` and
    `admin http://...` lines (the banner's last)."""
    assert proc.stdout is not None
    with open(log, "ab") as out:
        for line in proc.stdout:
            out.write(line)
            out.flush()
            text = line.decode(errors="replace")
            if "GPT-Live" in text and "://" in text and not found:  # ws:// or, with TLS, wss://
                found.append(text.split("://", 1)[1].split("/", 1)[0])
            elif text.lstrip().startswith("admin") and "http://" in text and len(found) == 1:
                found.append(text.split("http://", 1)[1].split("/", 1)[0])
                ready.set()
    ready.set()


def interrupt(proc: subprocess.Popen[bytes], wait_s: float = 15.0, *, group: bool = False) -> None:
    """SIGINT (a `liveplex` command stops its children and exits), killed if it lingers past `wait_s`.
    `group`: to its whole process group, as a terminal's Ctrl-C does (`proc` leads one)."""
    if proc.poll() is None:
        if group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def subprocess_pod(*flags: str, log: Path, command: str = "serve", stderr: Path | None = None,
                   liveplex: Sequence[str] = LIVEPLEX) -> Iterator[tuple[Running, subprocess.Popen[bytes]]]:
    """`liveplex COMMAND --host 127.0.0.1 --port 0 FLAGS` (default `serve --engine sim`) as a
    child process; yields once it has printed where it listens. Its stderr (the JSON logs) goes
    to `log` with its stdout, or to `stderr` apart. `liveplex` is the command (another venv's)."""
    head = ["serve", "--engine", "sim"] if command == "serve" else [command]
    errors = open(stderr, "wb") if stderr is not None else None  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [*liveplex, *head, "--host", "127.0.0.1", "--port", "0", *flags],
        stdout=subprocess.PIPE, stderr=errors or subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    found: list[str] = []
    ready = threading.Event()
    reader = threading.Thread(target=_announced, args=(proc, log, found, ready), daemon=True)
    reader.start()
    try:
        if not ready.wait(READY_S) or len(found) < 2:
            raise RuntimeError(f"liveplex {' '.join(head + list(flags))} did not start:\n{log.read_text()}")
        yield Running(found[0], found[1]), proc
    finally:
        interrupt(proc)  # SIGINT: exit now (SIGTERM would drain first)
        reader.join(5)
        if errors is not None:
            errors.close()
