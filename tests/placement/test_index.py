"""The index every writer keeps (`room`, `expiry`, `counted`, `totals`): it equals the truth after any
run of writes, and when time runs ahead of it (stale pods, expired leases) a placement still never
lands on a pod the truth rules out."""

from __future__ import annotations

import random

import pytest
import redis.asyncio

from liveplex.placement import STALE_MS, Busy, Mode, Placed, PlacementClient, PodRecord, pool_keys
from tests.placement import truth

POOL = "default/pp"
K = pool_keys(POOL)
Raw = redis.asyncio.Redis


async def redis_now(raw: Raw) -> int:
    seconds, micros = await raw.time()
    return seconds * 1000 + micros // 1000


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_index_equals_the_truth_after_a_random_run(client: PlacementClient, raw: Raw, seed: int) -> None:
    rng = random.Random(seed)
    pods = [f"pod-{i}" for i in range(10)]
    held: list[tuple[str, str]] = []  # (pod, session) placed and not settled yet
    landed: dict[str, PodRecord] = {}  # each pod's last beat: the next one sends what changed, as a pod's does
    for step in range(200):
        pod = rng.choice(pods)
        op = rng.random()
        if op < 0.3:
            record = PodRecord(f"10.0.0.{pods.index(pod)}:8000", rng.randint(0, 4), rng.randint(0, 3),
                               draining=rng.random() < 0.1, degraded=rng.random() < 0.3)
            if await client.heartbeat(POOL, pod, record, ttl_ms=60_000, since=landed.get(pod)) is None:
                await client.heartbeat(POOL, pod, record, ttl_ms=60_000)  # the record was gone: whole
            landed[pod] = record
        elif op < 0.6:
            exclude = set(rng.sample(pods, rng.randint(0, 2)))
            result = await client.place(POOL, f"s{step}", exclude, rng.choice(list(Mode)),
                                        tiebreak=rng.getrandbits(31))
            if isinstance(result, Placed):
                assert result.pod not in exclude
                held.append((result.pod, f"s{step}"))
        elif op < 0.75 and held:
            pod, session = held.pop(rng.randrange(len(held)))
            await rng.choice([client.accept, client.release])(POOL, pod, session, rng.randint(0, 3))
        elif op < 0.8 and held:
            pod, session = held.pop(rng.randrange(len(held)))
            await client.unreserve(POOL, pod, session)
        elif op < 0.85:
            await client.set_active(POOL, pod, rng.randint(0, 3))
        elif op < 0.88:
            await client.drain(POOL, pod)
        elif op < 0.91:
            await client.remove_pod(POOL, pod)
            held = [h for h in held if h[0] != pod]
        else:  # time passes: a pod stops beating, or a lease runs out; the next placement catches up
            now = await redis_now(raw)
            if op < 0.96:
                await raw.zadd(K.members, {pod: now - STALE_MS - 5000}, xx=True)
            elif held:
                pod, session = held.pop(rng.randrange(len(held)))
                if await raw.zadd(K.resv(pod), {session: now - 1000}, xx=True, ch=True):
                    await raw.zadd(K.expiry, {pod: now - 1000}, lt=True)
            result = await client.place(POOL, f"s{step}")
            if isinstance(result, Placed):
                held.append((result.pod, f"s{step}"))
        await truth.assert_index_is_true(raw, POOL)


async def test_a_lagging_index_steers_but_never_places_on_a_stale_pod(client: PlacementClient, raw: Raw) -> None:
    pods = [f"pod-{i:02d}" for i in range(40)]
    batch = client.batch()
    for i, pod in enumerate(pods):
        batch.heartbeat(POOL, pod, PodRecord("10.0.0.1:8000", 100 if i else 1, 0), ttl_ms=60_000)
    await batch.send()
    now = await redis_now(raw)
    await raw.zadd(K.members, {pod: now - STALE_MS - 5000 for pod in pods[1:]}, xx=True)  # 39 went silent
    assert await client.place(POOL, "s0") == Placed("pod-00", "10.0.0.1:8000", POOL)  # the one fresh pod, least room
    assert await client.place(POOL, "s1") == Busy(1, 0, no_engines=False)
    assert await raw.zcard(K.members) == 1  # 16 pruned per call, the rest as the picks met them
    await truth.assert_index_is_true(raw, POOL)


async def test_an_expired_lease_frees_its_slot_for_the_next_placement(client: PlacementClient, raw: Raw) -> None:
    await client.heartbeat(POOL, "pod-a", PodRecord("10.0.0.1:8000", 1, 0), ttl_ms=60_000)
    assert isinstance(await client.place(POOL, "s1", lease_ms=50), Placed)
    assert isinstance(await client.place(POOL, "s2"), Busy)
    assert await raw.zscore(K.expiry, "pod-a") is not None
    now = await redis_now(raw)
    while await redis_now(raw) <= now + 60:
        pass
    assert await client.place(POOL, "s3") == Placed("pod-a", "10.0.0.1:8000", POOL)
    assert await raw.zrange(K.resv("pod-a"), 0, -1) == ["s3"]
    await truth.assert_index_is_true(raw, POOL)


async def test_a_pool_written_before_the_index_is_indexed_by_whole_beats(client: PlacementClient, raw: Raw) -> None:
    record = PodRecord("10.0.0.1:8000", 4, 1)
    await raw.zadd(K.members, {"pod-a": await redis_now(raw)})  # what an older heartbeat left: no index
    await raw.hset(K.pod("pod-a"), mapping=record.to_hash())
    assert await client.place(POOL, "s1") == Busy(0, 0, no_engines=True)  # the index steers: nothing in it
    await client.heartbeat(POOL, "pod-a", record)  # a pod's first beat is whole
    await truth.assert_index_is_true(raw, POOL)
    assert await client.place(POOL, "s2") == Placed("pod-a", "10.0.0.1:8000", POOL)
