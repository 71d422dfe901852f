"""`Pod`: one serving process's lifecycle: start, drain(deadline), stop.

It owns the engine thread, the live sockets' `EngineBackend` and `Front`, and the optional
`Publisher` (the Redis heartbeat) beside them. Drain (platform §5): set `draining` at once (the
heartbeat says so to every gateway within one period, `/ready` turns 503, new starts are
`server_busy`), let running sessions end by themselves, and at the deadline end the rest with
`server_shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Protocol

from liveplex.gptlive.served import Served
from liveplex.gptlive.server.app import SHUTDOWN_GRACE_S, Front
from liveplex.gptlive.server.drain import Drain
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.live.runner import EngineThread
from liveplex.pod import backend, stats
from liveplex.pod.settings import PodSettings

logger = logging.getLogger(__name__)



class Publisher(backend.Settles, Protocol):
    """What a pod tells the outside world about its load (the Redis heartbeat): each session
    outcome at once (`backend.Settles`), and the rest below."""

    async def start(self, pod: Pod) -> None: ...

    async def drain(self) -> None:
        """Say `draining` now, not at the next period."""

    async def stop(self) -> None:
        """Leave the pool."""

    @property
    def reserved(self) -> int:
        """Sessions placed on this pod that have not started, as last read from the pool."""
        ...


class Pod:
    """See the module docstring."""

    def __init__(self, engine: EngineThread, served: Served, server: ServerSettings,
                 settings: PodSettings, publisher: Publisher | None = None) -> None:
        self.engine = engine
        self.served = served
        self.settings = settings
        self.backend = backend.EngineBackend(served, server.protocol, settings.reattach_grace_s,
                                              settings.pause)
        self.front = Front(server, self.backend)
        self.backend.front = self.front
        self.publisher = publisher
        if publisher is not None:
            self.backend.settles = publisher
        self.model_load_s = 0.0
        self.drain = Drain(self.front, self._live, settings.drain_deadline_s, self._announce_drain)
        """`pod.drain(deadline_s)`: platform §5, see `server.drain`."""
        self._started_ns = 0
        self.bound: tuple[str, int] | None = None
        """The address the server bound (set once it listens): the default advertised address."""
        self.listening = asyncio.Event()
        """Set by `bind`."""

    def bind(self, host: str, port: int) -> None:
        """The server listens at `host:port` (port 0 resolved)."""
        self.bound = (host, port)
        self.listening.set()

    @property
    def draining(self) -> bool:
        return self.backend.draining

    @property
    def ready(self) -> bool:
        """Serving new sessions: the engine runs and the pod is not draining."""
        return self.engine.ready and self.backend.handle is not None and not self.draining

    def snapshot(self) -> stats.PodSnapshot:
        return stats.snapshot(self.served.info, self.engine.pulse, self.front.stats.snapshot(),
                              self.ready, self.draining, self.model_load_s,
                              self.settings.lateness_budget_ms,
                              self.publisher.reserved if self.publisher is not None else 0,
                              self.backend.parking_snapshot(), self.backend.pause_stats.snapshot())

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Start, serve, stop: the app's lifecycle."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def start(self) -> None:
        self._started_ns = time.monotonic_ns()
        self.backend.handle = self.engine.start(asyncio.get_running_loop())
        asyncio.get_running_loop().create_task(self._loaded())
        if self.publisher is not None:
            await self.publisher.start(self)

    async def _loaded(self) -> None:
        """Record the model load time once the engine is built."""
        await asyncio.to_thread(self.engine.wait_built)
        self.model_load_s = round((time.monotonic_ns() - self._started_ns) / 1e9, 3)

    def _live(self) -> int:
        pulse = self.engine.pulse
        return max(self.front.stats.sessions_open, pulse.sessions if pulse else 0)

    async def _announce_drain(self) -> None:
        self.backend.draining = True
        if self.publisher is not None:
            await self.publisher.drain()
        asked = self.backend.request_moves()
        if asked:
            logger.info("asked gateways to move sessions", extra={"sessions": asked})

    async def stop(self) -> None:
        """Leave the pool, end what still runs, stop the engine thread."""
        if self.publisher is not None:
            await self.publisher.stop()
        await self.front.end_sessions(SHUTDOWN_GRACE_S)
        self.backend.handle = None
        await asyncio.to_thread(self.engine.stop)
