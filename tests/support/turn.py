"""A real TURN server for tests: Debian's coturn (`turnserver`) on the machine's own interface
address (aioice leaves 127.0.0.1 out of its candidates), long-term credentials, UDP and TCP on one
free port, relay ports from a small range. It is stopped at the end."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import ifaddr
import pytest

USER, PASSWORD = "liveplex", "turn-secret"


@dataclass(frozen=True)
class Turn:
    address: str
    port: int
    password_file: Path

    def url(self, transport: str = "udp") -> str:
        return f"turn:{self.address}:{self.port}?transport={transport}"


def interface_address() -> str:
    """The first IPv4 address that is not loopback: where ICE candidates live on this machine."""
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127."):
                return ip.ip
    pytest.skip("no non-loopback IPv4 address for ICE")


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def turnserver(tmp: Path) -> Iterator[Turn]:
    binary = shutil.which("turnserver")
    if binary is None:
        pytest.fail("turnserver is missing: `bash scripts/test` installs Debian's coturn")
    address = interface_address()
    port = _free_port(address)
    low = 49152 + port % 10000
    password = tmp / "turn-password"
    password.write_text(PASSWORD + "\n")
    log = tmp / "turnserver.log"
    proc = subprocess.Popen([
        binary, "-n", "--listening-ip", address, "--relay-ip", address, "--listening-port", str(port),
        "--lt-cred-mech", "--user", f"{USER}:{PASSWORD}", "--realm", "liveplex", "--fingerprint",
        "--no-tls", "--no-dtls", "--no-cli", "--min-port", str(low), "--max-port", str(low + 200),
        "--log-file", str(log), "--simple-log", "--no-stdout-log", "--pidfile", str(tmp / "turnserver.pid"),
    ], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # its TCP listener is up once it serves
            with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=0.2):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"turnserver exited:\n{log.read_text() if log.exists() else ''}")
            time.sleep(0.05)
        yield Turn(address, port, password)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
