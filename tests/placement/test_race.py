"""A race: 4 OS processes place ~4,000 sessions on small pods at once (8 pods, and 1,024); no pod ever
holds more than its capacity, and afterwards the index equals the truth."""

from __future__ import annotations

import asyncio
import multiprocessing
import random

import pytest
import redis
import redis.asyncio

from liveplex.placement import pool_keys
from tests.placement import racer, truth

POOL = "default/race"
PROCS = 4
PLACEMENTS = 1000


@pytest.mark.parametrize(("pods", "most", "end_probability", "heartbeat_s"),
                         [(8, 3, 0.5, 0.1), (1024, 2, 0.3, 0.5)])  # 1,024 pods beat at the real rate
def test_concurrent_gateways_never_overbook_a_pod(redis_url: str, pods: int, most: int, end_probability: float,
                                                  heartbeat_s: float) -> None:
    rng = random.Random(20240611)
    capacities = {f"pod-{i}": rng.randint(1, most) for i in range(pods)}
    context = multiprocessing.get_context("spawn")
    inboxes = [context.Queue() for _ in range(PROCS)]
    results = context.Queue()
    processes = [
        context.Process(target=racer.run, args=(
            racer.Plan(i, PROCS, redis_url, POOL, capacities, PLACEMENTS, seed=rng.getrandbits(32),
                       end_probability=end_probability, heartbeat_s=heartbeat_s), inboxes, results))
        for i in range(PROCS)
    ]
    for process in processes:
        process.start()
    try:
        reports = [results.get(timeout=120) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    assert all(process.exitcode == 0 for process in processes)

    assert [r.violations for r in reports] == [[]] * PROCS
    assert sum(r.overbooked for r in reports) == 0
    assert sum(r.lost_leases for r in reports) == 0
    placed = sum(r.placed for r in reports)
    settled = sum(r.accepted + r.refused + r.unreserved for r in reports)
    assert placed == settled, "every placed session was accepted, refused or unreserved exactly once"
    # the race was a real one: pods filled up, sessions started and ended
    assert sum(r.busy for r in reports) > 0 and sum(r.accepted for r in reports) > 0
    assert sum(r.ended for r in reports) > 0

    # the final audit: Redis agrees with every engine's own count, and no reservation is left behind
    k = pool_keys(POOL)
    running = {pod: n for r in reports for pod, n in r.running.items()}
    with redis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=2) as client:
        for pod, capacity in capacities.items():
            assert int(client.hget(k.pod(pod), "active")) == running[pod] <= capacity
            assert client.zcard(k.resv(pod)) == 0
    asyncio.run(_index_is_true(redis_url))


async def _index_is_true(url: str) -> None:
    async with redis.asyncio.Redis.from_url(url, decode_responses=True, socket_timeout=5) as raw:
        await truth.assert_index_is_true(raw, POOL)
