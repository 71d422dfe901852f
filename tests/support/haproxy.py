"""A real load balancer for tests: Debian's HAProxy (`haproxy`) as a child process, a TCP frontend
on a free loopback port balancing `roundrobin` over gateway backends on loopback, each health-checked
with `GET /ready` (a draining gateway answers 503, a dead one refuses the check); a connection that
finds its server refusing is dispatched to another at once (`option redispatch 1`). What a load
balancer in front of gateway replicas does (docs/deploy.md), WebSockets passed through as TCP; its
log (one `tcplog` line per connection, retries included) goes to `haproxy.log` beside its config.

    with haproxy.balancer(tmp, ["127.0.0.1:8001", "127.0.0.1:8002"]) as lb:
        lb.url            # http://127.0.0.1:PORT/v1, the SDK's base_url
        lb.states()       # {"g0": "UP", "g1": "DOWN"}, HAProxy's own view, from its stats socket
        lb.wait_states({"g0": "UP"})
        lb.set_state("g1", "maint")   # no new connections to g1 until "ready"

It is stopped at the end (SIGTERM, then SIGKILL if it lingers). Backends are fixed at start: a
replaced replica comes back on the same address.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECK_MS = 200
"""Health-check period, down and up alike: a backend is marked after one failed or passed check."""

CONFIG = """\
global
    stats socket {socket} mode 600 level admin
    maxconn 2000
    log stdout format raw local0

defaults
    mode tcp
    log global
    option tcplog
    timeout connect 1s
    timeout client 1h
    timeout server 1h
    retries 3
    option redispatch 1

frontend live
    bind {bind}
    default_backend gateways

backend gateways
    balance roundrobin
    option httpchk
    http-check send meth GET uri /ready ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server check inter {check}ms fastinter {check}ms downinter {check}ms rise 1 fall 1
{servers}
"""


@dataclass(frozen=True)
class Balancer:
    address: str
    """`127.0.0.1:PORT`, where callers connect."""
    socket_path: Path
    """HAProxy's admin socket (`show stat`)."""
    names: tuple[str, ...]
    """The backends' server names, `g0`, `g1`, ... in the order given."""
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        """What the SDK takes as `base_url`."""
        return f"http://{self.address}/v1"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.address}/v1/live/sessions"

    def command(self, line: str) -> str:
        """One command on HAProxy's admin socket; its answer."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(str(self.socket_path))
            s.sendall(line.encode() + b"\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return data.decode()

    def set_state(self, name: str, state: str) -> None:
        """`ready`, `drain` or `maint`: an operator's hand on a backend (`maint`: no new
        connections go there, established ones stay)."""
        answer = self.command(f"set server gateways/{name} state {state}")
        assert not answer.strip(), answer

    def states(self) -> dict[str, str]:
        """Each backend's state as HAProxy sees it (`UP`, `DOWN`, `MAINT`, ...; a transition reads
        like `UP 1/2`)."""
        lines = self.command("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(head, line.split(","), strict=False)) for line in lines[1:] if line]
        return {r["svname"]: r["status"] for r in rows if r.get("pxname") == "gateways" and r["svname"] in self.names}

    def wait_states(self, wanted: dict[str, str], deadline_s: float = 10.0) -> None:
        """Wait until the named backends are in the states given."""
        end = time.monotonic() + deadline_s
        while True:
            seen = self.states()
            if all(seen.get(name) == state for name, state in wanted.items()):
                return
            if time.monotonic() > end:
                raise AssertionError(f"HAProxy's backends stayed {seen}, not {wanted}, for {deadline_s} s")
            time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def balancer(tmp: Path, backends: Sequence[str], wait_up: bool = True) -> Iterator[Balancer]:
    """HAProxy balancing over `backends` (`host:port` each, loopback), the first being `g0`; with
    `wait_up`, it is yielded once every backend is UP."""
    binary = shutil.which("haproxy")
    if binary is None:
        pytest.fail("haproxy is missing: `bash scripts/test` and `bash scripts/test-clients` install Debian's haproxy")
    port = free_port()
    names = tuple(f"g{i}" for i in range(len(backends)))
    stats = tmp / "haproxy.sock"
    config = tmp / "haproxy.cfg"
    config.write_text(CONFIG.format(
        socket=stats, bind=f"127.0.0.1:{port}", check=CHECK_MS,
        servers="\n".join(f"    server {name} {address}" for name, address in zip(names, backends, strict=True))))
    log = open(tmp / "haproxy.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([binary, "-f", str(config), "-db"], stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 10
        while not stats.exists() or not _listening(port):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"haproxy did not start:\n{(tmp / 'haproxy.log').read_text()}")
            time.sleep(0.05)
        running = Balancer(f"127.0.0.1:{port}", stats, names, proc)
        if wait_up:
            running.wait_states(dict.fromkeys(names, "UP"))
        yield running
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
