"""Slot leases over the preallocated pools, kept compact (Decision D7, spec personaplex §5.3).

Running sessions occupy slots 0..n-1, so each tick runs rows 0..bucket-1 of every pool as views:
no gathers, static addresses for CUDA graphs. When a session ends, the session in the highest
slot moves into the hole; `release` says which move the engine must copy. Pure: no tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class LeaseError(RuntimeError):
    """A lease operation that the engine's own accounting should have made impossible."""


@dataclass(frozen=True, slots=True)
class Move:
    """Copy every pool row of slot `src` into slot `dst`; `src` is free afterwards."""

    src: int
    dst: int


def permute(dst_of: Mapping[int, int], spare: int) -> list[Move]:
    """Moves, one at a time, that take every slot `src` of `dst_of` to `dst_of[src]` (a
    permutation of occupied slots onto free or vacated ones: a change of tick groups, issue 44).
    A chain goes from its free end; a cycle goes through `spare`, a slot no one holds."""
    pending = {s: d for s, d in dst_of.items() if s != d}
    moves: list[Move] = []
    while pending:
        free = next((s for s, d in pending.items() if d not in pending), None)
        if free is not None:
            moves.append(Move(free, pending.pop(free)))
            continue
        src, dst = next(iter(pending.items()))  # only cycles left: open one through the spare
        moves.append(Move(src, spare))
        del pending[src]
        pending[spare] = dst
    return moves


class Leases:
    """Which of `capacity` slots are leased, always the prefix 0..live-1."""

    __slots__ = ("capacity", "live")

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise LeaseError(f"a pool needs at least one slot, got {capacity}")
        self.capacity = capacity
        self.live = 0
        """Leased slots: exactly 0..live-1."""

    def acquire(self) -> int:
        """Lease the lowest free slot (always `live`)."""
        if self.live >= self.capacity:
            raise LeaseError(f"all {self.capacity} slots are leased")
        self.live += 1
        return self.live - 1

    def release(self, slot: int) -> Move | None:
        """Free `slot`; returns the move that keeps the layout compact, if one is needed."""
        if not 0 <= slot < self.live:
            raise LeaseError(f"slot {slot} is not leased (leased: 0..{self.live - 1})")
        self.live -= 1
        top = self.live
        return None if slot == top else Move(src=top, dst=slot)
