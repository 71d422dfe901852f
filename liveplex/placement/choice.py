"""`choose`: the placement decision of `place.lua` (platform §6.4), in Python.

The gateway uses it to place from its last snapshot while Redis is down (platform §7.12, fail-open:
no reservation is written, the engine's hard cap decides), and the tests use it as the oracle that
`place.lua` must agree with on any pool. Rank: pods with room only; healthy before degraded; then the
most free slots (`spread`) or the fewest (`pack`); equals are broken by `tiebreak` modulo their
number, in pod-name order (the order of equal scores in `place.lua`'s `room` index).
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass

from liveplex.placement import load, snapshot, timing


class Mode(enum.StrEnum):
    """Which pod with room a placement prefers."""

    SPREAD = "spread"
    """Most free slots first: small batches, low latency (the default)."""
    PACK = "pack"
    """Fewest free slots first: fills pods so that idle ones can scale down."""


@dataclass(frozen=True, slots=True)
class Placed:
    """The session goes to `pod` at `addr`; `place.lua` also holds a slot there under a lease."""

    pod: str
    addr: str
    pool: str | None = None
    """The pool or sub-pool holding the lease: where the slot is given back (`unreserve`); None for a
    choice that reserved nothing (`choose` on a snapshot, fail-open)."""


@dataclass(frozen=True, slots=True)
class Busy:
    """No pod has room. The totals cover the fresh pods that were considered (not excluded, not draining)."""

    total_capacity: int
    total_active: int
    no_engines: bool
    """No fresh pod that is not draining exists at all (excluded pods count as existing): the gateway
    reports `no_engines` rather than `server_busy` (platform §7.3)."""


def choose(
    pool: snapshot.Snapshot | load.Summary,
    exclude: Collection[str] = (),
    mode: Mode = Mode.SPREAD,
    tiebreak: int = 0,
    stale_ms: int = timing.STALE_MS,
) -> Placed | Busy:
    """Where `place.lua` would place a session on `pool`, given the same exclusions and tie-breaker.

    On a summary (its best candidates only) a placement is the same as on the whole
    pool while fewer than all candidates are excluded; a busy answer carries the pool's totals
    (draining pods' sessions and excluded pods included)."""
    best: tuple[bool, int] | None = None
    ties: list[snapshot.Member] = []
    capacity = active = engines = 0
    members = pool.candidates if isinstance(pool, load.Summary) else pool
    for member in members.fresh(stale_ms):
        pod = member.record
        if pod.draining:
            continue
        engines += 1
        if member.pod in exclude:
            continue
        capacity += pod.capacity
        active += pod.active
        free = pod.capacity - pod.active - member.reserved
        if free <= 0:
            continue
        rank = (pod.degraded, -free if mode == Mode.SPREAD else free)
        if best is None or rank < best:
            best, ties = rank, [member]
        elif rank == best:
            ties.append(member)
    if ties:
        chosen = sorted(ties, key=lambda m: m.pod.encode())[tiebreak % len(ties)]
        return Placed(chosen.pod, chosen.record.addr)
    if isinstance(pool, load.Summary):  # only pods with room: the pool's own totals say the rest
        totals = pool.load
        return Busy(totals.capacity, totals.active, no_engines=totals.fresh == totals.draining)
    return Busy(capacity, active, no_engines=engines == 0)
