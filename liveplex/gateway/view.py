"""`PoolView`: the gateway's picture of its pools, re-read from Redis every `refresh_ms`.

It holds the `PoolCatalog` the protocol validates starts against, and each pool's last summary (a
`Snapshot` of the pool's best candidates with its totals, `PlacementClient.summary`) with the
monotonic time it was read: fail-open placement (platform §7.12) may choose among its candidates
while it is younger than `snapshot_max_age_ms` and Redis is down, and `/live/stats` reads its totals.
A refresh reads a constant amount whatever the pool's size (routes, the config, K candidates), a
fraction of a millisecond, so it stays on the event loop. A refresh that fails keeps the previous
picture and counts a Redis error.
"""

from __future__ import annotations

import asyncio
import logging
import time

from liveplex.gateway.catalog import PoolCatalog
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive.served import Served
from liveplex.placement import PlacementClient, PlacementError, Snapshot

logger = logging.getLogger(__name__)


class PoolView:
    """See the module docstring."""

    def __init__(self, client: PlacementClient, default_pool: str | None, stats: GatewayStats) -> None:
        self._client = client
        self._stats = stats
        self.catalog = PoolCatalog(default_pool=default_pool)
        self.snapshots: dict[str, tuple[Snapshot, int]] = {}
        """Pool -> (its summary, monotonic ns when read)."""
        self.fresh = False
        """The last refresh reached Redis."""

    async def refresh(self) -> None:
        """Re-read routes, configs and summaries once; keeps the old picture on a Redis error."""
        try:
            routes = await self._client.routes()
            catalog = PoolCatalog(routes, {}, self.catalog.default_pool)
            served: dict[str, Served] = {}
            for pool in catalog.pools():
                config = await self._client.read_config(pool)
                if config is not None:
                    served[pool] = Served.from_config(config)
                self.snapshots[pool] = (await self._client.summary(pool), time.monotonic_ns())
            self.catalog = PoolCatalog(routes, served, catalog.default_pool)
            self.fresh = True
        except (PlacementError, ValueError) as exc:
            self.fresh = False
            self._stats.redis_errors += 1
            logger.warning("pool refresh failed", extra={"error": str(exc)})

    def snapshot(self, pool: str, max_age_ms: int) -> Snapshot | None:
        """The pool's last summary if it is younger than `max_age_ms`."""
        entry = self.snapshots.get(pool)
        if entry is None or time.monotonic_ns() - entry[1] > max_age_ms * 1_000_000:
            return None
        return entry[0]

    async def run(self, period_ms: int) -> None:
        """Refresh forever (the app's lifespan owns and cancels this task)."""
        while True:
            await self.refresh()
            await asyncio.sleep(period_ms / 1000)
