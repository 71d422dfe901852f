"""`RedisPlacer`: where this gateway's sessions go: placement in Redis with its fallback, and the breakers.

The legs' `leg.Placer`. `place` runs place.lua (in the better of two sub-pools when the route splits
the pool); with Redis down it chooses from the pool's last fresh snapshot (fail-open, platform
§7.12, no reservation: the pods' hard caps decide) or refuses (fail-closed, or no recent snapshot).
A pod that could not be reached, or failed a session, is tripped in the `Breaker` and left out of
placement for a while; a slot no session will use is given back in the (sub-)pool holding it.
"""

from __future__ import annotations

import logging
import random
import time

from liveplex.gateway.breaker import Breaker
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.view import PoolView
from liveplex.gptlive import errors
from liveplex.placement import Busy, Placed, PlacementClient, PlacementError, choose
from liveplex.tasks import Tasks

logger = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RedisPlacer:
    """See the module docstring."""

    def __init__(self, settings: GatewaySettings, client: PlacementClient, view: PoolView, stats: GatewayStats) -> None:
        self._settings = settings
        self._client = client
        self._view = view
        self._stats = stats
        self._breaker = Breaker(settings.breaker_ms)
        self._giving_back = Tasks()

    def tripped(self) -> frozenset[str]:
        """The pods the breakers exclude now."""
        return self._breaker.tripped(_now_ms())

    async def place(self, pool: str, session_id: str, exclude: set[str]) -> Placed | Busy | errors.ProtocolError:
        """A pod with a slot reserved for `session_id`, no room, or the refusal saying placement is
        unavailable."""
        try:
            return await self._client.place_among(pool, self._view.subpools(pool), session_id, exclude)
        except PlacementError as exc:
            self._stats.redis_errors += 1
            logger.warning("placement failed", extra={"pool": pool, "error": str(exc)})
        settings = self._settings
        snapshot = self._view.snapshot(pool, settings.snapshot_max_age_ms) if settings.fail_open else None
        if snapshot is None:
            self._stats.fallbacks["closed"] += 1
            return errors.placement_unavailable()
        self._stats.fallbacks["open"] += 1
        return choose(snapshot, exclude, tiebreak=random.getrandbits(31))

    async def unreachable(self, placed: Placed, session_id: str) -> None:
        """A failed connect: give the reservation back and stop dialling the pod for a while."""
        self._stats.connect_failures[placed.pod] += 1
        self._breaker.trip(placed.pod, _now_ms())
        await self.unreserve(placed, session_id)

    def blame(self, pod: str) -> None:
        """The pod failed a session it ran: stop dialling it for a while."""
        self._breaker.trip(pod, _now_ms())

    def give_back(self, placed: Placed, session_id: str) -> None:
        """`unreserve` in a task of the placer's own, which outlives the leg that asked (a move
        that is lost right after it abandoned a target ends its leg, and cancels the leg's I/O)."""
        self._giving_back.spawn(self.unreserve(placed, session_id))

    async def unreserve(self, placed: Placed, session_id: str) -> None:
        """Give back a slot placement reserved and no session will use, in the (sub-)pool holding it."""
        if placed.pool is None:  # a fail-open choice reserved nothing
            return
        try:
            await self._client.unreserve(placed.pool, placed.pod, session_id)
        except PlacementError:
            self._stats.redis_errors += 1  # the lease expires by itself
