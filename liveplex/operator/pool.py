"""What the operator reads from and writes to the placement Redis, as injected interfaces.

The operator never talks to Redis itself: the process that runs it passes a `LoadReader` and a
`RouteStore` (backed by `liveplex.placement`), and tests pass in-memory ones. Both are optional:
without them the status has no session figures and no routes are written.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LoadFigures:
    """One pool's figures over its fresh pods (platform §6.1), integers only, as the status roll-up and
    scale-down read them (`placement_store.pool_load` makes them of placement's `PoolLoad` and summary)."""

    active: int = 0
    """Running sessions, summed over pods."""
    reserved: int = 0
    """Unexpired placement leases, summed over pods."""
    capacity: int = 0
    """Advertised slots, summed over pods (draining pods excluded)."""
    p99_lateness_ms: int = 0
    """The worst p99 tick lateness among the emptiest pods, ms."""
    late_permille: int = 0
    """The worst share of late ticks among the emptiest pods, ‰."""
    emptiest: Mapping[str, int] = field(default_factory=dict)
    """The pool's emptiest pods (placement's summary candidates, the most free slots) -> their active
    sessions: where a scale-down should remove pods (`deletion_cost`); a few, whatever the pool's size."""


class LoadReader(Protocol):
    async def read(self, pool: str, subpools: int, /) -> LoadFigures:
        """The load of pool `<ns>/<name>`, summed over its `subpools` sub-pools (1: not split); an empty
        pool is all zeros. Raises when Redis is unreachable."""
        ...


class RouteStore(Protocol):
    """`le:routes`: model name -> pool (`<ns>/<name>`, `<ns>/<name>*<count>` when split)."""

    async def read(self) -> Mapping[str, str]:
        ...

    async def write(self, set_: Mapping[str, str], delete: Collection[str]) -> None:
        """Set these routes and delete those model names, in one step."""
        ...
