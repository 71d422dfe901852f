"""Running a GPT-Live server process: JSON logs, uvicorn with the native live socket, and a
SIGTERM that drains before it exits. `liveplex serve` and `liveplex gateway` both run this way.

A first SIGTERM calls the server's drain (platform §5: new starts refused, running sessions
finish, the rest ended at the drain deadline) and then exits; SIGINT, or a second signal, exits
at once. Either way the last log line is `stopped`.

Logs are JSON lines on stderr (`liveplex.logs`), uvicorn's own included (`log_config=None` sends them to the root
logger); stdout carries only the banner for people, which says where the server listens once
bound (port 0 resolves here) and is also logged as `listening`.

Once started, the heap is frozen (`gc.freeze`): what startup allocated (the app, the engine, a
model's tensors) leaves the cyclic collector's view, so a full collection scans only what sessions
allocated since. Unfrozen, one full collection of a sim pod at 300 sessions stopped both threads
for 94-159 ms, which alone made about 1 % of all frames late (docs/bench.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any, cast

import uvicorn

from liveplex.gptlive import events
from liveplex.gptlive.server import http_protocol, native
from liveplex.gptlive.server.app import Front
from liveplex.gptlive.server.settings import ServerSettings

logger = logging.getLogger(__name__)

App = Callable[..., Any]
"""An ASGI application, as uvicorn serves it (the pod's and the gateway's `Front` apps)."""

WS_PROTOCOL = native.LiveProtocol
"""uvicorn's `ws=`: serves `/v1/live/sessions` without ASGI, every other upgrade through the app."""

HTTP_PROTOCOL = http_protocol.HttpProtocol
"""uvicorn's `http=`: httptools with a header timeout and a connection cap."""


class Server(uvicorn.Server):
    """See the module docstring; `bound(host, port)` returns the banner to print."""

    def __init__(self, config: uvicorn.Config, bound: Callable[[str, int], str],
                 drain: Callable[[], Awaitable[object]], draining: Callable[[], bool]) -> None:
        super().__init__(config)
        self._bound = bound
        self._drain = drain
        self._draining = draining
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = time.perf_counter()
        self._tls: asyncio.Task[None] | None = None

    async def startup(self, sockets: list | None = None) -> None:
        """uvicorn serves the client listener (with TLS when configured); the admin listener is
        added here, always plain, with the same protocols and state."""
        self._loop = loop = asyncio.get_running_loop()
        assert sockets is not None and len(sockets) == 2, "run.listeners(): the client and the admin listener"
        public, admin = sockets
        await super().startup([public])
        if self.started:
            config = self.config
            # uvicorn types `http_protocol_class` as `type[asyncio.Protocol]`; its classes take these
            protocol = cast(Callable[..., asyncio.Protocol], config.http_protocol_class)
            self.servers.append(await loop.create_server(
                lambda: protocol(config=config, server_state=self.server_state, app_state=self.lifespan.state),
                sock=admin, backlog=config.backlog))
            certfile, keyfile = config.ssl_certfile, config.ssl_keyfile
            if config.ssl is not None and certfile is not None and keyfile is not None:  # uvicorn made one from both
                self._tls = loop.create_task(_reload_tls(config.ssl, Path(certfile), Path(keyfile)))
            gc.collect()
            gc.freeze()
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            admin_host, admin_port = self.servers[1].sockets[0].getsockname()[:2]
            logger.info("listening", extra={"host": host, "port": port, "admin_host": admin_host,
                                            "admin_port": admin_port, "frozen_objects": gc.get_freeze_count()})
            text = self._bound(host, port)
            if config.ssl is not None:
                text = text.replace("ws://", "wss://").replace("http://", "https://")
            print(text + "\n" + ADMIN_LINE.format(at=_at(admin_host), port=admin_port), flush=True)

    async def shutdown(self, sockets: list | None = None) -> None:
        """Logged here: uvicorn re-raises a captured SIGTERM after serving, which ends the process
        before `run` returns."""
        if self._tls is not None:
            self._tls.cancel()
        await super().shutdown(sockets)
        logger.info("stopped", extra={"uptime_s": round(time.perf_counter() - self._started, 1),
                                      "signals": [signal.Signals(s).name for s in self._captured_signals]})

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._loop
        if sig != signal.SIGTERM or self._draining() or loop is None or not self.started:
            super().handle_exit(sig, frame)
            return
        logger.info("SIGTERM: draining before exit")
        loop.call_soon_threadsafe(lambda: loop.create_task(self._drain_then_exit(sig, frame)))

    async def _drain_then_exit(self, sig: int, frame: FrameType | None) -> None:
        await self._drain()
        super().handle_exit(sig, frame)


def _at(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def banner(title: str, host: str, port: int) -> str:
    """Where a server listens, and how the SDK reaches it."""
    at = _at(host)
    return (f"{title}\n"
            f"  demo page  http://{at}:{port}/\n"
            f"  GPT-Live   ws://{at}:{port}/v1/live/sessions  (OpenAI(base_url=\"http://{at}:{port}/v1\"))")


ADMIN_LINE = "  admin      http://{at}:{port}/  (/drain, /metrics, /live/stats; not for clients)"


def listeners(front: Front, host: str, port: int) -> list[socket.socket]:
    """The client listener on `host:port` and the admin listener on the settings' address, bound
    now (port 0 resolved), with `front.admin_port` set: every server serves both."""
    bound = [socket.create_server((h, p), family=socket.AF_INET6 if ":" in h else socket.AF_INET, backlog=2048)
             for h, p in ((host, port), (front.settings.admin_host, front.settings.admin_port))]
    front.admin_port = bound[1].getsockname()[1]
    return bound


def config(app: App, settings: ServerSettings, **more: Any) -> uvicorn.Config:
    """How every GPT-Live server runs uvicorn (tests included): the native live socket, the bounded
    HTTP protocol, the 4 MiB message limit, the keepalive ping, and uvicorn's own log lines
    going through the JSON root logger (`log_config=None`); `more` adds or replaces options."""
    chosen: dict[str, Any] = {
        "http": HTTP_PROTOCOL, "ws": WS_PROTOCOL, "ws_max_size": events.MAX_MESSAGE_BYTES,
        "ws_ping_interval": settings.ws_ping_interval_s, "ws_ping_timeout": settings.ws_ping_interval_s,
        "lifespan": "on", "log_config": None, "log_level": "warning", "access_log": False}
    return uvicorn.Config(app, **{**chosen, **more})


TLS_RELOAD_S = 10.0
"""How often the certificate files are looked at: a renewed certificate serves new connections
within this, and established sessions keep theirs."""


async def _reload_tls(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    """Load `cert` and `key` into the serving context again whenever either file changes (new
    handshakes use them); a file caught half-written keeps the old pair until the next look."""
    def stamp() -> tuple[tuple[int, int], ...]:
        return tuple((s.st_mtime_ns, s.st_size) for s in (cert.stat(), key.stat()))

    seen = stamp()
    while True:
        await asyncio.sleep(TLS_RELOAD_S)
        try:
            now = stamp()
            if now != seen:
                context.load_cert_chain(cert, key)
                seen = now
                logger.info("tls certificate reloaded", extra={"cert": str(cert)})
        except (OSError, ssl.SSLError) as exc:
            logger.warning("tls certificate not reloaded", extra={"cert": str(cert), "error": str(exc)})


def run(app: App, front: Front, host: str, port: int, bound: Callable[[str, int], str],
        drain: Callable[[], Awaitable[object]], draining: Callable[[], bool]) -> None:
    """Serve `app` on both listeners until stopped; a `stopped` line says after how long and which
    signals. The addresses were checked (`listen.check`); binding fails here only in a race."""
    sockets = listeners(front, host, port)
    settings = front.settings
    tls = {} if settings.tls_cert is None else {"ssl_certfile": str(settings.tls_cert),
                                                "ssl_keyfile": str(settings.tls_key)}
    server = Server(config(app, settings, loop="uvloop", timeout_graceful_shutdown=5, **tls), bound, drain, draining)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises a captured SIGINT once stopped
        server.run(sockets=sockets)
