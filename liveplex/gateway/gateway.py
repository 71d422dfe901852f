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
from liveplex.gateway.calls import CallHolders
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.view import PoolView
from liveplex.gptlive.server.app import SHUTDOWN_GRACE_S, Front
from liveplex.gptlive.server.drain import Drain
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.placement import PlacementClient

logger = logging.getLogger(__name__)



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
        if settings.peer_url is not None:
            self.front.holders = CallHolders(self.client, settings.peer_url)
        self.drain = Drain(self.front, lambda: self.backend.sessions, settings.drain_deadline_s,
                           self._announce_drain)
        """`gateway.drain(deadline_s)`: the same drain as a pod's (`server.drain`)."""

    @property
    def draining(self) -> bool:
        return self.backend.draining

    @property
    def ready(self) -> bool:
        return not self.draining and self.view.fresh

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        await self.view.refresh()
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self.view.run(self.settings.refresh_ms)), loop.create_task(self.backend.watch())]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.front.end_sessions(SHUTDOWN_GRACE_S)
            await self.backend.close()
            await self.client.close()

    async def _announce_drain(self) -> None:
        self.backend.draining = True
