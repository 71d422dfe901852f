"""`Snapshot`: a pool as Redis held it at one instant, read atomically by `snapshot.lua` (every pod)
or `summary.lua` (the best candidates and the pool's totals).

Members come in `ZRANGE` order (heartbeat, then pod name), the order in which `place.lua` meets
them; `reserved` counts only unexpired leases. A member whose hash has expired is left out, as
`place.lua` prunes it. Stale members stay in, so the operator can count them; `fresh` filters them.
"""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.placement import record, timing


@dataclass(frozen=True, slots=True)
class Member:
    """One pod of the pool: its record, its heartbeat and its unexpired reservations."""

    pod: str
    record: record.PodRecord
    heartbeat_ms: int
    """The pod's `members` score: its last heartbeat, Redis TIME in ms."""
    reserved: int
    """Sessions placed on the pod whose lease has not expired and that the engine has not settled."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Pods of a pool at Redis time `now_ms`: every one (`PlacementClient.snapshot`), or the best
    candidates of a `load.Summary`."""

    now_ms: int
    members: tuple[Member, ...]

    def fresh(self, stale_ms: int = timing.STALE_MS) -> tuple[Member, ...]:
        """The members that heartbeated within `stale_ms` of `now_ms`: the ones `place.lua` keeps."""
        oldest = self.now_ms - stale_ms
        return tuple(m for m in self.members if m.heartbeat_ms >= oldest)
