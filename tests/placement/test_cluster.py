"""Sub-pools on a real 3-shard Redis Cluster: a pool split by hash tag spreads over the shards, a
gateway places among them, and when a shard dies placement goes on in the others and never overbooks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from liveplex.placement import Busy, PlacementClient, PodRecord, RedisUnavailable, pool_keys, subpools
from liveplex.placement.local_redis import LocalCluster

pytestmark = pytest.mark.slow  # a cluster forms in ~2 s (Redis' own writable delay); CI runs these

POOL = "default/big"
SUBPOOLS = 6
PODS = 36
CAPACITY = 2


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(shards=3) as running:
        yield running


def owner(cluster: LocalCluster, sub: str) -> int:
    """The shard (index into `cluster.shards`) holding a sub-pool's slot."""
    with redis.Redis(port=cluster.shards[0].port, decode_responses=True) as node:
        slot = node.execute_command("CLUSTER", "KEYSLOT", pool_keys(sub).members)
    return min(slot // (16384 // len(cluster.shards)), len(cluster.shards) - 1)  # LocalCluster's even split


async def test_sub_pools_place_across_shards_and_survive_a_dead_shard(cluster: LocalCluster) -> None:
    pods = {f"pp-{i:03d}": subpools.of(POOL, f"pp-{i:03d}", SUBPOOLS) for i in range(PODS)}
    shard_of = {sub: owner(cluster, sub) for sub in subpools.names(POOL, SUBPOOLS)}
    assert set(shard_of.values()) == {0, 1, 2}, "the sub-pools' tags spread over every shard"
    assert set(pods.values()) == set(shard_of), "every sub-pool has pods"

    async with PlacementClient(cluster.url, timeout_ms=1000, cluster=True) as client:
        for pod, sub in pods.items():
            await client.heartbeat(sub, pod, PodRecord(f"10.0.0.{pod[-3:]}:8000", CAPACITY, 0), ttl_ms=60_000)
        assert sum([(await client.totals(sub)).capacity for sub in shard_of]) == PODS * CAPACITY

        # every shard up: the first placements spread (each lands on a pod with both slots free)
        where: dict[str, int] = {}
        for n in range(PODS // 2):
            placed = await client.place_among(POOL, SUBPOOLS, f"warm-{n}", stale_ms=60_000)
            assert not isinstance(placed, Busy) and pods[placed.pod] == placed.pool
            where[placed.pod] = where.get(placed.pod, 0) + 1
        assert max(where.values()) == 1, where

        dead = 1
        cluster.shards[dead].stop()
        alive = [sub for sub, shard in shard_of.items() if shard != dead]
        room = sum([(await client.totals(sub)).free for sub in alive])
        placed_after = 0
        for n in range(room + 5):
            try:
                answer = await client.place_among(POOL, SUBPOOLS, f"s-{n}", stale_ms=60_000)
            except RedisUnavailable:
                pytest.fail("placement stopped although two shards live")
            if isinstance(answer, Busy):
                break
            assert answer.pool is not None and shard_of[answer.pool] != dead
            placed_after += 1
        assert placed_after == room, "every free slot of the live shards was used, and no more"
        assert isinstance(answer, Busy) and not answer.no_engines
        for sub in alive:  # the audit: no pod holds more than its capacity
            for member in (await client.snapshot(sub)).members:
                assert member.record.active + member.reserved <= member.record.capacity, member

        for shard in cluster.shards:
            shard.stop()
        with pytest.raises(RedisUnavailable):
            await client.place_among(POOL, SUBPOOLS, "nowhere", stale_ms=60_000)
