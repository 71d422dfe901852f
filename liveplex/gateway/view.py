"""`PoolView`: the gateway's picture of its pools, re-read from Redis every `refresh_ms`.

It holds the `PoolCatalog` the protocol validates starts against, each routed pool's sub-pool count
(from its `le:routes` value, `subpools.routed`), and each pool's last summary (a `Summary` of the
pool's best candidates with its totals, `PlacementClient.summary_among`) with the
monotonic time it was read: fail-open placement (platform §7.12) may choose among its candidates
while it is younger than `snapshot_max_age_ms` and Redis is down, and `/live/stats` reads its totals.
A refresh reads a constant amount whatever the pool's size (routes, the config, K candidates per
sub-pool), a fraction of a millisecond, so it stays on the event loop. A refresh that fails keeps the previous
picture and counts a Redis error.
"""

from __future__ import annotations

import asyncio
import logging
import time

from liveplex.gateway.catalog import PoolCatalog
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive.served import Served
from liveplex.placement import PlacementClient, PlacementError, Summary, subpools

logger = logging.getLogger(__name__)


class PoolView:
    """See the module docstring."""

    def __init__(self, client: PlacementClient, default_pool: str | None, stats: GatewayStats) -> None:
        self._client = client
        self._stats = stats
        self.catalog = PoolCatalog(default_pool=default_pool)
        self._counts: dict[str, int] = {}
        """Routed pool -> its sub-pool count."""
        self.snapshots: dict[str, tuple[Summary, int]] = {}
        """Pool -> (its summary, monotonic ns when read)."""
        self.fresh = False
        """The last refresh reached Redis."""

    async def refresh(self) -> None:
        """Re-read routes, configs and summaries once; keeps the old picture on a Redis error."""
        try:
            routed = {model: subpools.routed(value) for model, value in (await self._client.routes()).items()}
            routes = {model: pool for model, (pool, _) in routed.items()}
            counts = dict(routed.values())
            catalog = PoolCatalog(routes, {}, self.catalog.default_pool)
            served: dict[str, Served] = {}
            for pool in catalog.pools():
                config = await self._client.read_config(pool)
                if config is not None:
                    served[pool] = Served.from_config(config)
                summary = await self._client.summary_among(pool, counts.get(pool, 1))
                self.snapshots[pool] = (summary, time.monotonic_ns())
            self.catalog = PoolCatalog(routes, served, catalog.default_pool)
            self._counts = counts
            self.fresh = True
        except (PlacementError, ValueError) as exc:
            self.fresh = False
            self._stats.redis_errors += 1
            logger.warning("pool refresh failed", extra={"error": str(exc)})

    def subpools(self, pool: str) -> int:
        """How many sub-pools `pool` is split into (1: not split, or not routed: `--pool`)."""
        return self._counts.get(pool, 1)

    def snapshot(self, pool: str, max_age_ms: int) -> Summary | None:
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
