"""`Gateway`: one gateway process's parts and lifecycle: Redis client, pool view, backend, drain.

Drain mirrors a pod's (platform §5, the gateway gets the same treatment): `/ready` turns 503 so
the Service stops sending new clients, new starts are refused, relayed sessions go on until they
end or the deadline, then end with `server_shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from liveplex.gateway.backend import GatewayBackend
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.view import PoolView
from liveplex.gptlive.server.app import SHUTDOWN_GRACE_S, Front
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.placement import PlacementClient

logger = logging.getLogger(__name__)

DRAIN_POLL_S = 0.05


class Gateway:
    """See the module docstring."""

    def __init__(self, settings: GatewaySettings, server: ServerSettings) -> None:
        self.settings = settings
        self.stats = GatewayStats()
        self.client = PlacementClient(settings.redis_url)
        self.view = PoolView(self.client, settings.default_pool, self.stats)
        self.backend = GatewayBackend(settings, server.protocol, server.api_keys, self.client, self.view,
                                      self.stats)
        self.front = Front(server, self.backend)
        self._drain: asyncio.Task[int] | None = None

    @property
    def draining(self) -> bool:
        return self.backend.draining

    @property
    def ready(self) -> bool:
        return not self.draining and self.view.fresh

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        await self.view.refresh()
        refreshing = asyncio.get_running_loop().create_task(self.view.run(self.settings.refresh_ms))
        try:
            yield
        finally:
            refreshing.cancel()
            await asyncio.gather(refreshing, return_exceptions=True)
            await self.front.end_sessions(SHUTDOWN_GRACE_S)
            await self.client.close()

    def drain(self, deadline_s: float | None = None) -> asyncio.Task[int]:
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(
                self._drained(self.settings.drain_deadline_s if deadline_s is None else deadline_s))
        return self._drain

    async def _drained(self, deadline_s: float) -> int:
        self.backend.draining = True
        logger.info("draining", extra={"sessions": self.backend.sessions, "deadline_s": deadline_s})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(deadline_s):
                while self.backend.sessions:
                    await asyncio.sleep(DRAIN_POLL_S)
        left = self.backend.sessions
        if left:
            await self.front.end_sessions(SHUTDOWN_GRACE_S)
        logger.info("drained", extra={"ended_at_deadline": left})
        return left
