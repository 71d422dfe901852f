"""The Lua scripts on a real redis-server: place, settle (accept, release, unreserve, set_active), drain, heartbeat."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import redis.asyncio

from liveplex.placement import LEASE_MS, POD_TTL_MS, STALE_MS, Busy, Mode, Placed, PlacementClient, PodRecord, pool_keys

POOL = "default/pp"
K = pool_keys(POOL)
Raw = redis.asyncio.Redis


async def beat(client: PlacementClient, pod: str, capacity: int, active: int = 0, *, ttl_ms: int = POD_TTL_MS,
               draining: bool = False, degraded: bool = False) -> None:
    record = PodRecord(addr(pod, capacity), capacity, active, draining=draining, degraded=degraded)
    await client.heartbeat(POOL, pod, record, ttl_ms=ttl_ms)


def addr(pod: str, capacity: int) -> str:
    return f"10.0.0.{len(pod)}:{capacity}"


async def redis_now_ms(raw: Raw) -> int:
    seconds, micros = await raw.time()
    return seconds * 1000 + micros // 1000


async def reservations(raw: Raw, pod: str) -> list[str]:
    return await raw.zrange(K.resv(pod), 0, -1)


async def eventually(check: Callable[[], Awaitable[bool]], deadline_s: float = 5.0) -> None:
    """Wait until `check()` holds; fail once `deadline_s` has passed."""
    deadline = time.monotonic() + deadline_s
    while not await check():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0.005)


# --- choosing ---------------------------------------------------------------------------------------


async def test_placement_picks_the_pod_with_most_free_slots(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 4, active=2)
    await beat(client, "pod-b", 4, active=0)
    assert await client.place(POOL, "s1") == Placed("pod-b", addr("pod-b", 4), POOL)
    assert await client.place(POOL, "s2") == Placed("pod-b", addr("pod-b", 4), POOL)
    assert await reservations(raw, "pod-b") == ["s1", "s2"]
    # now 2 free on each: a tie; the tiebreak picks in member order
    placed = {(await client.place(POOL, f"t{t}", tiebreak=t)).pod for t in (0, 1)}
    assert placed == {"pod-a", "pod-b"}


async def test_pack_mode_fills_the_fullest_pod_with_room_first(client: PlacementClient) -> None:
    await beat(client, "pod-a", 4, active=1)
    await beat(client, "pod-b", 4, active=3)
    await beat(client, "pod-c", 4, active=4)
    assert (await client.place(POOL, "s1", mode=Mode.PACK)).pod == "pod-b"
    assert (await client.place(POOL, "s2", mode="pack")).pod == "pod-a"  # pod-b is full with the lease


async def test_draining_pods_are_skipped_and_the_drain_is_published(
    client: PlacementClient, raw: Raw
) -> None:
    await beat(client, "pod-a", 8)
    await beat(client, "pod-b", 1)
    async with raw.pubsub() as pubsub:
        await pubsub.subscribe(K.events)
        await client.drain(POOL, "pod-a")
        deadline = time.monotonic() + 5
        message = None
        while message is None:
            assert time.monotonic() < deadline, "no drain notice"
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
    assert message["data"] == "pod-a"
    assert await raw.hget(K.pod("pod-a"), "draining") == "1"
    assert (await client.place(POOL, "s1")).pod == "pod-b"
    assert await client.place(POOL, "s2") == Busy(total_capacity=1, total_active=0, no_engines=False)


async def test_excluded_pods_are_skipped(client: PlacementClient) -> None:
    await beat(client, "pod-a", 8)
    await beat(client, "pod-b", 1)
    assert (await client.place(POOL, "s1", exclude=["pod-a"])).pod == "pod-b"
    assert await client.place(POOL, "s2", exclude=("pod-a",)) == Busy(1, 0, no_engines=False)


async def test_degraded_pods_rank_after_healthy_pods_with_room(client: PlacementClient) -> None:
    await beat(client, "pod-a", 8, degraded=True)
    await beat(client, "pod-b", 2)
    assert [(await client.place(POOL, f"s{i}")).pod for i in range(3)] == ["pod-b", "pod-b", "pod-a"]


# --- what a placement counts ------------------------------------------------------------------------


async def test_reservations_count_against_capacity(client: PlacementClient) -> None:
    await beat(client, "pod-a", 3, active=1)
    assert [await client.place(POOL, f"s{i}") for i in range(3)] == [
        Placed("pod-a", addr("pod-a", 3), POOL), Placed("pod-a", addr("pod-a", 3), POOL), Busy(3, 1, no_engines=False)]


async def test_placing_the_same_session_twice_holds_one_slot(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 2)
    await client.place(POOL, "s1")
    await client.place(POOL, "s1")
    assert await reservations(raw, "pod-a") == ["s1"]


async def test_a_lease_runs_for_lease_ms_from_redis_time(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 2)
    before = await redis_now_ms(raw)
    await client.place(POOL, "s1")
    after = await redis_now_ms(raw)
    expiry = await raw.zscore(K.resv("pod-a"), "s1")
    assert before + LEASE_MS <= expiry <= after + LEASE_MS
    assert 0 < await raw.pttl(K.resv("pod-a")) <= LEASE_MS + STALE_MS


async def test_an_expired_lease_is_dropped_and_frees_its_slot(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 1, ttl_ms=60_000)
    assert (await client.place(POOL, "s1", lease_ms=100)).pod == "pod-a"
    assert isinstance(await client.place(POOL, "s2", lease_ms=100), Busy)

    async def expired() -> bool:
        return await redis_now_ms(raw) > await raw.zscore(K.resv("pod-a"), "s1")

    await eventually(expired)
    assert (await client.snapshot(POOL)).members[0].reserved == 0
    assert (await client.place(POOL, "s2")).pod == "pod-a"
    assert await reservations(raw, "pod-a") == ["s2"]


# --- settling: accept, release, unreserve, set_active --------------------------------------------------


async def test_accept_moves_the_lease_into_active_exactly_once(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 2)
    await client.place(POOL, "s1")
    assert await client.accept(POOL, "pod-a", "s1", active=1) is True
    assert await reservations(raw, "pod-a") == []
    assert await raw.hget(K.pod("pod-a"), "active") == "1"
    # a second accept (a retry, a duplicate) neither frees nor takes a slot
    assert await client.accept(POOL, "pod-a", "s1", active=1) is False
    member = (await client.snapshot(POOL)).members[0]
    assert (member.record.active, member.reserved) == (1, 0)
    assert (await client.place(POOL, "s2")).pod == "pod-a"
    assert await client.place(POOL, "s3") == Busy(2, 1, no_engines=False)


async def test_a_session_whose_lease_expired_is_still_accepted(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 2)
    assert await client.accept(POOL, "pod-a", "never-placed", active=1) is False
    assert await raw.hget(K.pod("pod-a"), "active") == "1"


async def test_release_frees_the_slot(client: PlacementClient) -> None:
    await beat(client, "pod-a", 1)
    await client.place(POOL, "s1")
    assert isinstance(await client.place(POOL, "s2"), Busy)
    assert await client.release(POOL, "pod-a", "s1", active=0) is True
    assert (await client.place(POOL, "s2")).pod == "pod-a"


async def test_unreserve_gives_the_slot_back_without_touching_active(
    client: PlacementClient, raw: Raw
) -> None:
    await beat(client, "pod-a", 1, active=0)
    await client.place(POOL, "s1")
    assert await client.unreserve(POOL, "pod-a", "s1") is True
    assert await client.unreserve(POOL, "pod-a", "s1") is False
    assert await raw.hget(K.pod("pod-a"), "active") == "0"
    assert (await client.place(POOL, "s2")).pod == "pod-a"


async def test_set_active_writes_at_once_but_never_creates_a_partial_record(
    client: PlacementClient, raw: Raw
) -> None:
    await beat(client, "pod-a", 4, active=3)
    await client.set_active(POOL, "pod-a", 1)
    assert await raw.hget(K.pod("pod-a"), "active") == "1"
    await client.set_active(POOL, "pod-gone", 1)
    await client.accept(POOL, "pod-gone", "s1", 1)
    await client.drain(POOL, "pod-gone")
    assert await raw.exists(K.pod("pod-gone")) == 0


# --- freshness: heartbeat, stale members, expired hashes -------------------------------------------------


async def test_heartbeat_writes_the_record_a_ttl_and_a_redis_time_score(
    client: PlacementClient, raw: Raw
) -> None:
    record = PodRecord("10.1.2.3:8000", 64, 5, tick_p99_us=4100, late_permille=2, engine_version="sim-1",
                       started_ms=1234)
    before = await redis_now_ms(raw)
    await client.heartbeat(POOL, "pod-a", record)
    after = await redis_now_ms(raw)
    assert PodRecord.from_hash(await raw.hgetall(K.pod("pod-a"))) == record
    assert 0 < await raw.pttl(K.pod("pod-a")) <= POD_TTL_MS
    assert before <= await raw.zscore(K.members, "pod-a") <= after


async def test_a_stale_member_is_pruned_and_never_placed_on(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 4)
    await beat(client, "pod-b", 4)
    await raw.zadd(K.members, {"pod-a": await redis_now_ms(raw) - STALE_MS - 1000})
    assert [(await client.place(POOL, f"s{i}")).pod for i in range(3)] == ["pod-b"] * 3
    assert await raw.zscore(K.members, "pod-a") is None
    await beat(client, "pod-a", 4)  # a heartbeat brings it back
    assert (await client.place(POOL, "s4")).pod == "pod-a"


async def test_a_member_whose_hash_expired_is_pruned(client: PlacementClient, raw: Raw) -> None:
    await beat(client, "pod-a", 4, ttl_ms=30)

    async def hash_gone() -> bool:
        return await raw.exists(K.pod("pod-a")) == 0

    await eventually(hash_gone)
    assert await raw.zscore(K.members, "pod-a") is not None
    assert await client.place(POOL, "s1") == Busy(0, 0, no_engines=True)
    assert await raw.zscore(K.members, "pod-a") is None


async def test_busy_and_no_engines_are_told_apart(client: PlacementClient) -> None:
    assert await client.place(POOL, "s1") == Busy(0, 0, no_engines=True)
    await beat(client, "pod-a", 2, draining=True)
    assert await client.place(POOL, "s1") == Busy(0, 0, no_engines=True)
    await beat(client, "pod-b", 2, active=2)
    assert await client.place(POOL, "s1") == Busy(2, 2, no_engines=False)


async def test_remove_pod_takes_its_record_reservations_and_membership(
    client: PlacementClient, raw: Raw
) -> None:
    await beat(client, "pod-a", 2)
    await client.place(POOL, "s1")
    await client.remove_pod(POOL, "pod-a")
    assert await raw.exists(K.pod("pod-a"), K.resv("pod-a")) == 0
    assert await raw.zscore(K.members, "pod-a") is None
    assert await client.place(POOL, "s2") == Busy(0, 0, no_engines=True)


async def test_a_beat_since_the_last_one_writes_only_what_changed_and_the_placement_fields(
    client: PlacementClient, raw: Raw
) -> None:
    first = PodRecord("10.1.2.3:8000", 8, 1, tick_p99_us=4000, engine_version="v1", started_ms=7)
    assert await client.heartbeat(POOL, "pod-a", first) == 0
    await raw.hset(K.pod("pod-a"), mapping={"engine_version": "by-hand", "active": "5"})
    second = PodRecord("10.1.2.3:8000", 8, 1, tick_p99_us=4500, engine_version="v1", started_ms=7)
    assert await client.heartbeat(POOL, "pod-a", second, since=first) == 0
    written = await raw.hgetall(K.pod("pod-a"))
    assert written["engine_version"] == "by-hand"  # unchanged since `first`: not sent
    assert written["tick_p99_us"] == "4500" and written["active"] == "1"  # changed; placement's, always


async def test_a_partial_beat_on_a_lost_record_writes_nothing_and_says_so(client: PlacementClient, raw: Raw) -> None:
    record = PodRecord("10.1.2.3:8000", 8, 1)
    assert await client.heartbeat(POOL, "pod-a", record, since=record) is None
    assert await raw.exists(K.pod("pod-a")) == 0 and await raw.zscore(K.members, "pod-a") is None
    assert await client.heartbeat(POOL, "pod-a", record) == 0  # the whole record
    assert PodRecord.from_hash(await raw.hgetall(K.pod("pod-a"))) == record
