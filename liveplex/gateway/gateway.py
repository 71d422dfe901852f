"""`Gateway`: one gateway process's parts and lifecycle: Redis client, pool view, placer, pod link,
backend, the watchdog's round, drain.

Drain (SIGTERM, the preStop hook): `/ready` turns 503 so the Service stops sending new clients, new
starts are refused, and every relayed session is handed back: it stays on its pod, and its caller
is closed 1012 to reconnect through another replica (docs/continuity.md "Re-attach"). What cannot
be handed back (a WebRTC call, whose media ends here; a session between pods) goes on until it ends
or the deadline, then ends with `server_shutdown`, as a pod's drain does (platform §5).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator

from liveplex.gateway.backend import GatewayBackend
from liveplex.gateway.calls import CallHolders
from liveplex.gateway.leg import Shared
from liveplex.gateway.placer import RedisPlacer
from liveplex.gateway.pod_link import PodLink
from liveplex.gateway.sessions import SessionHolders
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.storing import Recorder
from liveplex.gateway.view import PoolView
from liveplex.gateway.watchdog import Watchdog
from liveplex.gptlive.server.app import SHUTDOWN_GRACE_S, Front
from liveplex.gptlive.server.drain import Drain
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.placement import PlacementClient
from liveplex.storage.settings import open_store
from liveplex.storage.store import StoreError

logger = logging.getLogger(__name__)

STALL_MS = 100
"""A watchdog round this late means the loop was blocked (every relayed frame waited as long)."""


def _collections() -> list[int]:
    """The collector's run counts per generation (to tell a GC pause from other stalls)."""
    return [g["collections"] for g in gc.get_stats()]


class Gateway:
    """See the module docstring."""

    def __init__(self, settings: GatewaySettings, server: ServerSettings) -> None:
        self.settings = settings
        self.stats = GatewayStats()
        self.client = PlacementClient(settings.redis_url)
        self.view = PoolView(self.client, settings.default_pool, self.stats)
        self.placer = RedisPlacer(settings, self.client, self.view, self.stats)
        self.link = PodLink.of(settings, server.protocol.start_timeout_ms / 1000)
        self.sessions = SessionHolders(self.client)
        try:
            store = open_store(settings.store)
        except StoreError as exc:
            raise ValueError(f"--store-s3-bucket: {exc}") from exc
        self.recorder = None if store is None else Recorder(store, settings.store, self.stats)
        """Where stored calls go (`store: true`); None: this gateway refuses `store: true`."""
        shared = Shared(self.placer, self.link, self.stats, asyncio.Semaphore(settings.moves_at_once),
                        self.sessions, self.recorder, settings.peer_url)
        self.backend = GatewayBackend(settings, server.protocol, server.api_keys, self.view, shared)
        self._watchdog = Watchdog(settings.upstream_silence_ms * 1_000_000)
        self.front = Front(server, self.backend)
        self.peer_tls = settings.peer_tls(server.tls_cert is not None)
        """How this replica dials the others (a relayed sideband or hangup); None: plain."""
        if settings.peer_url is not None:
            self.front.holders = CallHolders(self.client, settings.peer_url, self.peer_tls)
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
        tasks = [loop.create_task(self.view.run(self.settings.refresh_ms)), loop.create_task(self._watch())]
        if self.recorder is not None:
            tasks.append(loop.create_task(self.recorder.run()))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.front.end_sessions(SHUTDOWN_GRACE_S)
            if self.recorder is not None:
                await self.recorder.close()
            await self.link.close()
            await self.client.close()

    async def _watch(self) -> None:
        """Run the `Watchdog` over every relayed session until cancelled; a round that ran over
        `STALL_MS` late is this loop's own stall, logged with what the collector did meanwhile."""
        period_ns = self._watchdog.period_ns
        due = time.monotonic_ns() + period_ns
        collections = _collections()
        while True:
            await asyncio.sleep(max(0, due - time.monotonic_ns()) / 1e9)
            now = time.monotonic_ns()
            late_ns = now - due
            legs = self.backend.legs
            if late_ns > STALL_MS * 1_000_000:
                self.stats.loop_stalls += 1
                logger.warning("event loop stalled", extra={
                    "stalled_ms": round(late_ns / 1e6), "sessions": len(legs),
                    "gc_collections": [a - b for a, b in zip(_collections(), collections)]})
            collections = _collections()
            for leg in self._watchdog.check(legs, now, late_ns):
                leg.silenced()
            due = now + period_ns

    async def _announce_drain(self) -> None:
        """New sessions are refused; every relayed session is handed back: it stays on its pod and
        its caller reconnects through another replica (`UpstreamLeg.hand_back`), so a rollout under
        calls takes seconds, not the longest call."""
        self.backend.draining = True
        for leg in self.backend.legs:
            leg.hand_back()
