"""A redis-server as production runs it: TLS only (no plain port), a certificate from a CA made in
the test, the default user behind a password and an ACL user the platform connects as."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis
import trustme

from liveplex.placement import local_redis

USER, PASSWORD, ADMIN_PASSWORD = "liveplex", "s3cret-user", "s3cret-admin"
ACL = ("~*", "&*", "-@all", "+@read", "+@write", "+@scripting", "+@connection", "+time", "+publish")
"""The narrowest rights liveplex works with, as docs/deploy.md recommends them."""


@dataclass(frozen=True)
class SecureRedis:
    url: str
    """`rediss://USER:PASSWORD@127.0.0.1:PORT/0`, without the CA."""
    ca: Path
    """The CA bundle that signed the server's certificate."""
    port: int


@contextlib.contextmanager
def secure_redis(tmp: Path) -> Iterator[SecureRedis]:
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    paths = {name: tmp / f"redis-{name}.pem" for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    issued.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    issued.private_key_pem.write_to_path(str(paths["key"]))
    port = local_redis._free_port()
    log = tmp / "redis.log"
    process = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(paths["cert"]), "--tls-key-file", str(paths["key"]),
         "--tls-ca-cert-file", str(paths["ca"]), "--tls-auth-clients", "no",
         "--requirepass", ADMIN_PASSWORD, "--user", USER, "on", f">{PASSWORD}", *ACL,
         "--save", "", "--appendonly", "no", "--dir", str(tmp), "--logfile", str(log)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"rediss://{USER}:{PASSWORD}@127.0.0.1:{port}/0"
    try:
        client = redis.Redis(host="127.0.0.1", port=port, password=ADMIN_PASSWORD, ssl=True,
                             ssl_ca_certs=str(paths["ca"]), socket_timeout=0.5, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:  # ours, not another server's on the port
                if client.info("server")["process_id"] == process.pid:
                    break
            except redis.ConnectionError:
                pass
            assert process.poll() is None, f"redis-server exited: {log.read_text() if log.exists() else ''}"
            assert time.monotonic() < deadline, f"redis-server not ready: {log.read_text() if log.exists() else ''}"
            time.sleep(0.05)
        client.close()
        yield SecureRedis(url, paths["ca"], port)
    finally:
        process.kill()
        process.wait(10)
