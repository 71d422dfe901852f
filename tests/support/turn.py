"""A real TURN server for tests: Debian's coturn (`turnserver`) on the machine's own interface
address (aioice leaves 127.0.0.1 out of its candidates), UDP and TCP on one free port, relay ports
from a small range; its logins either one static user or, with `secret`, the TURN REST API's
time-limited ones (`use-auth-secret`, as the chart runs it); with `tls`, TLS on a second port
with a certificate for that address from a CA made here (`Turn.ca_file`: what a client trusts).
It is stopped at the end."""

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
import trustme

USER, PASSWORD = "liveplex", "turn-secret"
SECRET = "turn-rest-secret"


@dataclass(frozen=True)
class Turn:
    address: str
    port: int
    password_file: Path
    """The static user's password, or (with `secret`) the shared secret."""
    tls_port: int = 0
    ca_file: Path | None = None

    def url(self, transport: str = "udp") -> str:
        return f"turn:{self.address}:{self.port}?transport={transport}"

    def tls_url(self) -> str:
        return f"turns:{self.address}:{self.tls_port}?transport=tcp"


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


def _certificate(tmp: Path, address: str) -> tuple[list[str], Path]:
    """coturn's TLS flags with a certificate for `address`, and the CA file that trusts it."""
    ca = trustme.CA()
    issued = ca.issue_cert(address)
    cert, key, ca_file = tmp / "turn-cert.pem", tmp / "turn-key.pem", tmp / "turn-ca.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())
    ca.cert_pem.write_to_path(str(ca_file))
    return ["--cert", str(cert), "--pkey", str(key)], ca_file


@contextlib.contextmanager
def turnserver(tmp: Path, secret: bool = False, tls: bool = False) -> Iterator[Turn]:
    binary = shutil.which("turnserver")
    if binary is None:
        pytest.fail("turnserver is missing: `bash scripts/test` installs Debian's coturn")
    address = interface_address()
    port = _free_port(address)
    tls_port = _free_port(address) if tls else 0
    low = 49152 + port % 10000
    password = tmp / "turn-password"
    password.write_text((SECRET if secret else PASSWORD) + "\n")
    logins = (["--use-auth-secret", f"--static-auth-secret={SECRET}"] if secret
              else ["--lt-cred-mech", "--user", f"{USER}:{PASSWORD}"])
    tls_flags, ca_file = _certificate(tmp, address) if tls else (["--no-tls"], None)
    log = tmp / "turnserver.log"
    proc = subprocess.Popen([
        binary, "-n", "--listening-ip", address, "--relay-ip", address, "--listening-port", str(port),
        *(["--tls-listening-port", str(tls_port)] if tls else []),
        *logins, "--realm", "liveplex", "--fingerprint", *tls_flags,
        "--no-dtls", "--no-cli", "--min-port", str(low), "--max-port", str(low + 200),
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
        yield Turn(address, port, password, tls_port, ca_file)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
