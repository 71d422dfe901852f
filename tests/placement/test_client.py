"""`PlacementClient` at its edge: Redis failures become `PlacementError`s, scripts survive restarts, routes, config."""

from __future__ import annotations

import pytest
import redis.asyncio

from liveplex.placement import (
    InvalidName,
    InvalidRecord,
    LocalRedis,
    PlacementClient,
    PlacementError,
    PodRecord,
    RedisRefused,
    RedisUnavailable,
    pool_keys,
)

POOL = "default/pp"
K = pool_keys(POOL)
RECORD = PodRecord("10.0.0.1:8000", 2, 0)


async def test_redis_down_is_redis_unavailable_and_the_client_recovers_after_a_restart(
    redis_server: LocalRedis, redis_url: str
) -> None:
    async with PlacementClient(redis_url, timeout_ms=300) as client:
        await client.heartbeat(POOL, "pod-a", RECORD)
        redis_server.stop()
        with pytest.raises(RedisUnavailable):
            await client.place(POOL, "s1")
        with pytest.raises(PlacementError):
            await client.heartbeat(POOL, "pod-a", RECORD)
        redis_server.start()  # same port, empty, no scripts loaded: EVALSHA falls back to loading
        await client.heartbeat(POOL, "pod-a", RECORD)
        assert (await client.place(POOL, "s1")).pod == "pod-a"


async def test_an_unreachable_redis_fails_within_the_timeout() -> None:
    server = LocalRedis()
    server.start()
    server.stop()  # a port nobody listens on
    async with PlacementClient(server.url, timeout_ms=200) as client:
        with pytest.raises(RedisUnavailable):
            await client.route("gpt-live-1")


async def test_scripts_are_reloaded_after_a_script_flush(client: PlacementClient, raw: redis.asyncio.Redis) -> None:
    await client.heartbeat(POOL, "pod-a", RECORD)
    await raw.script_flush()
    assert (await client.place(POOL, "s1")).pod == "pod-a"


async def test_a_redis_error_reply_is_redis_refused(client: PlacementClient, raw: redis.asyncio.Redis) -> None:
    await raw.set(K.members, "not a zset")
    with pytest.raises(RedisRefused):
        await client.place(POOL, "s1")


async def test_bad_names_are_refused_before_any_redis_call() -> None:
    async with PlacementClient("redis://127.0.0.1:9/0", timeout_ms=100) as client:  # nothing listens on 9
        with pytest.raises(InvalidName) as raised:
            await client.place("no-namespace", "s1")
        assert raised.value.param == "pool"
        with pytest.raises(InvalidName) as raised:
            await client.accept(POOL, "pod-a", "", 1)
        assert raised.value.param == "session_id"
        with pytest.raises(InvalidName):
            await client.set_route("gpt-live-1", "bad pool")


async def test_routes_map_models_to_pools(client: PlacementClient, raw: redis.asyncio.Redis) -> None:
    assert await client.route("gpt-live-1") is None
    await client.set_route("gpt-live-1", POOL)
    await client.set_route("personaplex-7b", "prod/pp-big")
    assert await raw.hget("le:routes", "gpt-live-1") == POOL
    assert await client.route("gpt-live-1") == POOL
    assert await client.routes() == {"gpt-live-1": POOL, "personaplex-7b": "prod/pp-big"}
    await client.remove_route("gpt-live-1")
    assert await client.routes() == {"personaplex-7b": "prod/pp-big"}


async def test_the_pool_config_round_trips_as_json(client: PlacementClient, raw: redis.asyncio.Redis) -> None:
    assert await client.read_config(POOL) is None
    config = {"model": "personaplex-7b", "voices": ["NATF2", "NATM1"], "max_instructions_chars": 4000}
    await client.write_config(POOL, config)
    assert await client.read_config(POOL) == config
    await raw.set(K.config, "[1, 2]")
    with pytest.raises(InvalidRecord) as raised:
        await client.read_config(POOL)
    assert raised.value.param == "config"


async def test_a_snapshot_keeps_stale_members_and_leaves_out_expired_hashes(
    client: PlacementClient, raw: redis.asyncio.Redis
) -> None:
    await client.heartbeat(POOL, "pod-a", RECORD)
    await client.heartbeat(POOL, "pod-b", PodRecord("10.0.0.2:8000", 4, 1, draining=True))
    await client.place(POOL, "s1")
    await raw.zadd(K.members, {"pod-gone": 0, "pod-b": 1})
    snapshot = await client.snapshot(POOL)
    assert [(m.pod, m.heartbeat_ms, m.reserved) for m in snapshot.members][:1] == [("pod-b", 1, 0)]
    assert [m.pod for m in snapshot.members] == ["pod-b", "pod-a"]
    assert [m.pod for m in snapshot.fresh()] == ["pod-a"]
    assert snapshot.members[1].reserved == 1
    load = await client.load(POOL)
    assert (load.pods, load.fresh, load.reserved, load.capacity) == (2, 1, 1, 2)


async def test_a_hand_edited_pod_hash_is_invalid_record(client: PlacementClient, raw: redis.asyncio.Redis) -> None:
    await client.heartbeat(POOL, "pod-a", RECORD)
    await raw.hset(K.pod("pod-a"), "capacity", "lots")
    with pytest.raises(InvalidRecord) as raised:
        await client.snapshot(POOL)
    assert raised.value.param == "capacity"
