"""The index (`room`, `expiry`, `counted`, `totals`) recomputed from the truth it summarises, for tests.

The truth: the members, their hashes and their leases. Every member with a hash is `counted` (its
capacity, count, unexpired leases and draining flag); the busy totals sum the ones not draining; one
not draining has room when its capacity exceeds its count plus its unexpired leases; its earliest
remaining lease is its `expiry`.
"""

from __future__ import annotations

import redis.asyncio

from liveplex.placement import pool_keys

DEGRADED = 2**32
FIELDS = ("capacity", "active", "engines", "reserved", "draining", "draining_active")


async def expected_index(raw: redis.asyncio.Redis, pool: str) -> dict[str, object]:
    k = pool_keys(pool)
    seconds, micros = await raw.time()
    now = seconds * 1000 + micros // 1000
    room: dict[str, float] = {}
    expiry: dict[str, float] = {}
    counted: dict[str, str] = {}
    for pod in await raw.zrange(k.members, 0, -1):
        leases = [score for _, score in await raw.zrange(k.resv(pod), 0, -1, withscores=True)]
        if leases:
            expiry[pod] = min(leases)
        h = await raw.hgetall(k.pod(pod))
        if not h:
            continue
        live = sum(1 for s in leases if s >= now)
        counted[pod] = f"{h['capacity']} {h['active']} {live} {h['draining']}"
        free = int(h["capacity"]) - int(h["active"]) - live
        if free > 0 and h["draining"] == "0":
            room[pod] = free + (DEGRADED if h["degraded"] == "1" else 0)
    totals = dict.fromkeys(FIELDS, 0)
    for value in counted.values():
        capacity, active, reserved, draining = map(int, value.split())
        totals["reserved"] += reserved
        if draining:
            totals["draining"] += 1
            totals["draining_active"] += active
        else:
            totals["capacity"] += capacity
            totals["active"] += active
            totals["engines"] += 1
    return {"room": room, "expiry": expiry, "counted": counted, "totals": totals}


async def actual_index(raw: redis.asyncio.Redis, pool: str) -> dict[str, object]:
    k = pool_keys(pool)
    totals = await raw.hgetall(k.totals)
    return {"room": dict(await raw.zrange(k.room, 0, -1, withscores=True)),
            "expiry": dict(await raw.zrange(k.expiry, 0, -1, withscores=True)),
            "counted": await raw.hgetall(k.counted),
            "totals": {name: int(totals.get(name, 0)) for name in FIELDS}}


async def assert_index_is_true(raw: redis.asyncio.Redis, pool: str) -> None:
    assert await actual_index(raw, pool) == await expected_index(raw, pool)
