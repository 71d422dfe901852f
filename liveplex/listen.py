"""Where a server listens: the `--host` and `--port` flags of every command that serves, and their check.

`check` refuses before anything starts, with one line naming the flag, what would otherwise start
wrong or fail late: a port outside 0..65535 (the socket layer wraps 99999 to 34463 and serves
there), a host that does not resolve, and an address this machine cannot listen on (in use, or
not one of its own).
"""

from __future__ import annotations

import argparse
import socket

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
"""Where pods and gateways serve by default (engine pods in a cluster too: `operator.names.PORT`)."""
DEFAULT_BASE_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}/v1"
"""The SDK base URL of a server listening by default: what the clients' `--base-url` defaults to."""
MAX_PORT = 65535


def add_arguments(parser: argparse.ArgumentParser, what: str = "the server", port: int = DEFAULT_PORT) -> None:
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address {what} listens on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=port,
                        help=f"port {what} listens on, 0 picks a free one (default: %(default)s)")


def check(host: str, port: int, flags: tuple[str, str] = ("--host", "--port")) -> None:
    """Raises ValueError naming the flags (`flags`: the host's and the port's) when `host:port`
    cannot be listened on."""
    host_flag, port_flag = flags
    if not 0 <= port <= MAX_PORT:
        raise ValueError(f"{port_flag} must be in 0..{MAX_PORT}, got {port}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ValueError(f"{host_flag} {host!r} does not resolve: {exc.strerror}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise ValueError(f"{host_flag} {host} {port_flag} {port}: cannot listen there: {exc.strerror}") from None


ADMIN_FLAGS = ("--admin-host", "--admin-port")
