"""A pod's heartbeat writes what changed: the served description once, the record's unchanged fields
never again; after Redis lost everything (a restart, here a flush) one beat restores both."""

from __future__ import annotations

import asyncio

import redis.asyncio

from liveplex.placement import PlacementClient, pool_keys
from tests.support import pods

POOL = "test/beats"
K = pool_keys(POOL)


async def _commands(raw: redis.asyncio.Redis) -> dict[str, int]:
    stats = await raw.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


async def test_steady_beats_write_no_config_and_a_lost_record_comes_back_whole(redis_url: str) -> None:
    async with pods.in_process("--redis-url", redis_url, "--pool", POOL, "--pod-name", "pod-a",
                               "--advertise", "ws://127.0.0.1:9"), \
            PlacementClient(redis_url) as placement, \
            redis.asyncio.Redis.from_url(redis_url, decode_responses=True) as raw:
        async with asyncio.timeout(10):
            while await placement.read_config(POOL) is None or not await raw.exists(K.pod("pod-a")):
                await asyncio.sleep(0.05)
        await raw.config_resetstat()
        await asyncio.sleep(1.3)  # two or three beats
        calls = await _commands(raw)
        assert calls.get("set", 0) == 0, calls  # the description did not change: not rewritten
        assert calls["evalsha"] >= 2
        assert calls.get("hset", 0) == calls["evalsha"]  # one HSET per beat, of the changed fields only

        await raw.flushall()  # Redis lost everything
        async with asyncio.timeout(5):
            while await placement.read_config(POOL) is None or not await raw.exists(K.pod("pod-a")):
                await asyncio.sleep(0.05)
        record = await raw.hgetall(K.pod("pod-a"))
        assert record["addr"] == "127.0.0.1:9" and record["engine_version"] and record["started_ms"] != "0"
        assert await raw.zscore(K.members, "pod-a") is not None
