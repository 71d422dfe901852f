"""`place.lua` and `choice.choose` make the same decision on any pool (the Python twin is the oracle).

Each example writes a random pool straight into Redis (fresh, stale and hash-less members; live and
expired leases; draining and degraded pods), reads it back with `snapshot`, and compares `choose`
over the snapshot with what `place.lua` answers for the same exclusions, mode and tie-breaker.
Times sit far from the stale and lease boundaries, so the few ms between the two reads never matter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import redis.asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from liveplex.placement import LocalRedis, Mode, PlacementClient, PodRecord, choose, pool_keys
from tests.support.redis import flush

POOL = "default/pp"
K = pool_keys(POOL)
FAR_MS = 60_000
"""How far from `now` a stale heartbeat or a lease expiry sits: well clear of every boundary."""


@dataclass(frozen=True)
class Pod:
    name: str
    record: PodRecord
    has_hash: bool
    stale: bool
    age_ms: int
    live_leases: int
    expired_leases: int


PODS = st.builds(
    Pod,
    name=st.sampled_from([f"pod-{i}" for i in range(8)]),
    record=st.builds(PodRecord, addr=st.sampled_from(["10.0.0.1:8000", "10.0.0.2:8000"]),
                     capacity=st.integers(0, 6), active=st.integers(0, 4),
                     draining=st.sampled_from([False, False, False, True]), degraded=st.booleans()),
    has_hash=st.sampled_from([True, True, True, False]),  # False: the hash expired, the member stayed
    stale=st.sampled_from([False, False, True]),
    age_ms=st.sampled_from([0, 0, 0, 200, 500]),  # repeats make equal scores, so ties fall back to names
    live_leases=st.integers(0, 3),
    expired_leases=st.integers(0, 2),
)


async def _arrange(raw: redis.asyncio.Redis, pods: list[Pod]) -> None:
    seconds, micros = await raw.time()
    now = seconds * 1000 + micros // 1000
    pipe = raw.pipeline(transaction=False)
    for pod in pods:
        score = now - FAR_MS if pod.stale else now - pod.age_ms
        pipe.zadd(K.members, {pod.name: score})
        if pod.has_hash:
            pipe.hset(K.pod(pod.name), mapping=pod.record.to_hash())
            pipe.pexpire(K.pod(pod.name), FAR_MS)
        leases = {f"live-{i}": now + FAR_MS for i in range(pod.live_leases)}
        leases |= {f"gone-{i}": now - FAR_MS + i for i in range(pod.expired_leases)}
        if leases:
            pipe.zadd(K.resv(pod.name), leases)
    await pipe.execute()


async def _compare(url: str, pods: list[Pod], exclude: set[str], mode: Mode, tiebreak: int) -> None:
    raw = redis.asyncio.Redis.from_url(url, decode_responses=True, socket_timeout=2)
    try:
        async with PlacementClient(url, timeout_ms=2000) as client:
            await _arrange(raw, pods)
            expected = choose(await client.snapshot(POOL), exclude, mode, tiebreak)
            assert await client.place(POOL, "s-new", exclude, mode, tiebreak=tiebreak) == expected
    finally:
        await raw.aclose()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pods=st.lists(PODS, min_size=1, max_size=8, unique_by=lambda p: p.name),
    exclude=st.sets(st.sampled_from([f"pod-{i}" for i in range(8)]), max_size=2),
    mode=st.sampled_from(list(Mode)),
    tiebreak=st.integers(0, 2**31 - 1),
)
def test_place_lua_decides_as_choose_does(
    redis_server: LocalRedis, pods: list[Pod], exclude: set[str], mode: Mode, tiebreak: int
) -> None:
    if not redis_server.running:
        redis_server.start()
    flush(redis_server.url)
    asyncio.run(_compare(redis_server.url, pods, exclude, mode, tiebreak))
