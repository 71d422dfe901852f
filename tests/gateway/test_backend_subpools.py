"""The gateway's placement on a pool split into sub-pools, on one real redis-server (the hash tags only
matter to a cluster; `test_subpools_e2e.py` runs the same on one): the count comes from the route, each
placement names the sub-pool holding its lease, and a refused dial gives the slot back there."""

from __future__ import annotations

from liveplex.gateway.placer import RedisPlacer
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.view import PoolView
from liveplex.placement import Busy, Placed, PlacementClient, PodRecord, subpools

POOL = "test/split"


async def test_the_route_splits_the_pool_and_each_slot_goes_back_to_its_own_sub_pool(redis_url: str) -> None:
    async with PlacementClient(redis_url) as client:
        first, second = subpools.names(POOL, 2)
        home = {sub: next(f"pod-{i}" for i in range(64) if subpools.of(POOL, f"pod-{i}", 2) == sub)
                for sub in (first, second)}
        for sub, pod in home.items():
            await client.heartbeat(sub, pod, PodRecord(f"{pod}:8000", 1, 0), ttl_ms=60_000)
        await client.set_route("gpt-live-1", subpools.route(POOL, 2))
        stats = GatewayStats()
        view = PoolView(client, None, stats)
        await view.refresh()
        assert view.subpools(POOL) == 2 and view.subpools("test/unrouted") == 1
        summary = view.snapshot(POOL, 5_000)
        assert summary is not None and summary.load.capacity == 2
        placer = RedisPlacer(GatewaySettings(redis_url), client, view, stats)

        placed = [await placer.place(POOL, f"s{n}", set()) for n in range(2)]
        assert all(isinstance(p, Placed) for p in placed)
        assert {(p.pool, p.pod) for p in placed if isinstance(p, Placed)} == set(home.items()), "one in each"
        assert isinstance(await placer.place(POOL, "s2", set()), Busy)

        refused = placed[1]
        assert isinstance(refused, Placed) and refused.pool is not None
        await placer.unreachable(refused, "s1")
        assert (await client.totals(refused.pool)).reserved == 0, "given back in the sub-pool holding it"
        assert stats.connect_failures[refused.pod] == 1
