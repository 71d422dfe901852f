"""The operator's `LoadReader` and `RouteStore` over the placement Redis (`liveplex.placement`).

The status roll-up reads a pool's summary (`PlacementClient.summary_among`: the totals the index keeps and
the 16 emptiest pods of each sub-pool, O(sub-pools · 16 log N) whatever the pool's size; it read every
pod before issue 25);
routes are `le:routes`. Redis errors propagate as `PlacementError`: the roll-up then keeps the
previous figures.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from liveplex.operator import pool
from liveplex.placement import PlacementClient, Summary


def pool_load(summary: Summary) -> pool.LoadFigures:
    """The operator's view of one pool: its totals, and its emptiest fresh pods with their tick health."""
    fresh = summary.candidates.fresh()
    totals = summary.load
    return pool.LoadFigures(
        active=totals.active, reserved=totals.reserved, capacity=totals.capacity,
        p99_lateness_ms=max((m.record.late_p99_us for m in fresh), default=0) // 1000,
        late_permille=max((m.record.late_permille for m in fresh), default=0),
        emptiest={m.pod: m.record.active for m in fresh},
    )


class PlacementLoads:
    def __init__(self, client: PlacementClient) -> None:
        self._client = client

    async def read(self, pool_name: str, subpools: int) -> pool.LoadFigures:
        return pool_load(await self._client.summary_among(pool_name, subpools))


class PlacementRoutes:
    def __init__(self, client: PlacementClient) -> None:
        self._client = client

    async def read(self) -> Mapping[str, str]:
        return await self._client.routes()

    async def write(self, set_: Mapping[str, str], delete: Collection[str]) -> None:
        for model in delete:
            await self._client.remove_route(model)
        for model, route in set_.items():
            await self._client.set_route(model, route)
