"""`Snapshot`: a pool as Redis held it at one instant, read atomically by `snapshot.lua` (every pod)
or `summary.lua` (the best candidates and the pool's totals).

Members come in `ZRANGE` order (heartbeat, then pod name), the order in which `place.lua` meets
them; `reserved` counts only unexpired leases. A member whose hash has expired is left out, as
`place.lua` prunes it. Stale members stay in, so the operator can count them; `fresh` filters them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from liveplex.placement import record, timing

if TYPE_CHECKING:
    from liveplex.placement.load import PoolLoad


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
    """A pool at Redis time `now_ms`."""

    now_ms: int
    members: tuple[Member, ...]
    load: PoolLoad | None = None
    """Set on a summary (`PlacementClient.summary`), whose `members` are only the best candidates:
    the pool's totals, from its index. None on a whole snapshot, whose totals are its members' sums."""

    def fresh(self, stale_ms: int = timing.STALE_MS) -> tuple[Member, ...]:
        """The members that heartbeated within `stale_ms` of `now_ms`: the ones `place.lua` keeps."""
        oldest = self.now_ms - stale_ms
        return tuple(m for m in self.members if m.heartbeat_ms >= oldest)
