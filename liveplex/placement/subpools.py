"""Sub-pools: one pool split over Redis Cluster shards, and the gateway's choice between two of them.

One Redis core carries about 4,000-6,000 placements/s, less the pods' heartbeats (docs/bench.md); a
pool of 10,000 pods beats 20,000 times a second. A pool of `count` sub-pools keeps each sub-pool's
keys under its own hash tag (`le:{ns/name:k}:...`, `keys.subpool`), so each sub-pool is one cluster
slot and its scripts stay single-slot, and the slots spread over the shards. A pod belongs to one
sub-pool, by a stable hash of its name. A gateway picks two sub-pools at random, reads their totals
(an O(1) `HMGET` each) and places in the better one, falling back to the other and then the rest when
a sub-pool is full or its shard is down (power of two choices).

What this changes: a placement gets the best pod of the better of two sub-pools, not the best pod
of the pool; the reservation is still atomic and checked in one script on one shard, so nothing here
can overbook. Pure: the client (`PlacementClient.place_among`, `summary_among`) does the reads and the
placing.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from liveplex.placement import choice, errors, keys, load, snapshot

MAX_SUBPOOLS = 1024
"""More sub-pools than shards buys nothing; this bounds a typo."""


def check_count(count: int) -> int:
    """`count` unchanged if it is a sub-pool count (1 = a pool not split); `InvalidName` (param `subpools`)."""
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_SUBPOOLS:
        raise errors.InvalidName("subpools", count, f"a sub-pool count is an integer from 1 to {MAX_SUBPOOLS}")
    return count


def route(pool: str, count: int) -> str:
    """`pool`'s value in `le:routes`: its name, with `*<count>` when it is split (`<ns>/<name>*<count>`),
    so a gateway learns the count with the route, from the one key the operator writes."""
    name = keys.pool_keys(pool).name
    return name if check_count(count) == 1 else f"{name}*{count}"


def routed(value: str) -> tuple[str, int]:
    """The pool and its sub-pool count from a `le:routes` value (`route`); `InvalidName` when malformed."""
    name, star, count = value.partition("*")
    if not star:
        return keys.pool_keys(name).name, 1
    if not count.isdecimal():
        raise errors.InvalidName("subpools", count, "a route's sub-pool count is a number (<ns>/<name>*<count>)")
    return keys.pool_keys(name).name, check_count(int(count))


def names(pool: str, count: int) -> list[str]:
    """Every sub-pool of `pool`; with `count` 1 the pool itself (not split, its keys as ever)."""
    if check_count(count) == 1:
        return [keys.pool_keys(pool).name]
    return [keys.subpool(pool, k) for k in range(count)]


def of(pool: str, pod: str, count: int) -> str:
    """The sub-pool `pod` heartbeats into: a stable hash of its name (CRC-32), the same in every process."""
    return names(pool, count)[zlib.crc32(keys.check_pod(pod).encode()) % check_count(count)]


@dataclass(frozen=True, slots=True)
class Totals:
    """A sub-pool's `totals` hash (kept by the index): what the choice between two compares."""

    capacity: int
    """Slots on pods not draining."""
    active: int
    """Sessions on pods not draining."""
    reserved: int
    """Unexpired leases as of each pod's last change (draining pods' included)."""

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.active - self.reserved)

    @classmethod
    def of(cls, fields: Sequence[str | None]) -> Totals:
        """From `HMGET totals capacity active reserved` (missing fields: an empty sub-pool)."""
        capacity, active, reserved = (int(v or 0) for v in fields)
        return cls(capacity, active, reserved)


FIELDS = ("capacity", "active", "reserved")
"""The `totals` fields `Totals.of` reads, in its order."""


def pair(count: int, rng: random.Random, down: Collection[int] = ()) -> tuple[int, int]:
    """Two different sub-pools at random among those not `down` (shard unreachable of late); the same
    one twice when only one is up (or there is one); from all of them when none is up."""
    up = [k for k in range(check_count(count)) if k not in down] or list(range(count))
    if len(up) == 1:
        return up[0], up[0]
    first, second = rng.sample(up, 2)
    return first, second


def order(count: int, picked: tuple[int, int], totals: Sequence[Totals | None], mode: choice.Mode,
          rng: random.Random, down: Collection[int] = ()) -> list[int]:
    """The sub-pools to try, in order: the better of the two picked, the other, then the rest that are
    not `down`, at random.

    `totals` are the two picked sub-pools' (None: unreadable, its shard down), in `picked`'s order.
    Better: one with a free slot before one without; `spread` the larger free fraction, `pack` the
    smaller (a pack pool fills one sub-pool's pods before the next's); an unreadable one last; a tie
    keeps the random order."""
    def rank(t: Totals | None) -> tuple[int, float]:
        if t is None:
            return 2, 0.0
        if t.free == 0:
            return 1, 0.0
        fraction = t.free / t.capacity
        return 0, -fraction if mode == choice.Mode.SPREAD else fraction

    first, second = picked
    if first == second:
        ranked = [first]
    else:
        ranked = [first, second] if rank(totals[0]) <= rank(totals[1]) else [second, first]
    rest = [k for k in range(count) if k not in ranked and k not in down]
    rng.shuffle(rest)
    return ranked + rest


def merge_busy(answers: Sequence[choice.Busy]) -> choice.Busy:
    """Every sub-pool was full: the pool's busy answer (totals summed; no engines only if none had any)."""
    return choice.Busy(total_capacity=sum(a.total_capacity for a in answers),
                       total_active=sum(a.total_active for a in answers),
                       no_engines=all(a.no_engines for a in answers))


def merge_summaries(parts: Sequence[load.Summary]) -> load.Summary:
    """The pool's summary from its sub-pools' (at least one), each read on its own shard's clock: every
    member's heartbeat is moved onto the latest clock so it keeps its age (`fresh` stays right), the
    candidates are all of theirs (`count` times as many) and the totals are summed."""
    now = max(p.candidates.now_ms for p in parts)
    members = tuple(dataclasses.replace(m, heartbeat_ms=m.heartbeat_ms + now - p.candidates.now_ms)
                    for p in parts for m in p.candidates.members)
    totals = [p.load for p in parts]
    summed = load.PoolLoad(*(sum(getattr(t, f.name) for t in totals) for f in dataclasses.fields(load.PoolLoad)))
    worst = max(t.worst_tick_p99_us for t in totals)
    return load.Summary(snapshot.Snapshot(now, members), dataclasses.replace(summed, worst_tick_p99_us=worst))
