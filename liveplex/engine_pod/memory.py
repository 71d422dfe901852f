"""The session cap from device memory (spec personaplex §5.12), as pure arithmetic.

After weights and voice prefixes are resident: the most sessions S whose slots, the spare slots
kept beside them (a varying G's regroup passes its cycles of moves through one) and the outputs the
captured graphs keep fit the free memory less the reserve (issue 44: G groups capture graphs per
group and bucket).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from liveplex.engine_pod import buckets
from liveplex.live import groups

GIB = 1 << 30


class CapacityError(ValueError):
    """The requested sessions do not fit the device, or none does."""


@dataclass(frozen=True, slots=True)
class SlotBytes:
    """What one slot costs on the device, by pool."""

    kv: int
    """Temporal K and V over the whole ring, all layers."""
    mimi: int
    """Mimi encoder and decoder streaming state."""
    tokens: int
    """Token state and I/O rows."""

    @property
    def total(self) -> int:
        return self.kv + self.mimi + self.tokens


def kv_bytes(layers: int, context: int, dim: int, element_bytes: int) -> int:
    """Temporal KV of one slot: layers x (K, V) x context x dim (1.465 GiB for the real model, bf16)."""
    return layers * 2 * context * dim * element_bytes


def graph_bytes(sessions: int, counts: Sequence[int], bucket_sizes: Sequence[int], row_bytes: int) -> int:
    """Device bytes the captured graphs keep past their capture, for `sessions` slots: each graph's
    output (`row_bytes` a row of its bucket), one graph per bucket of every group of every group
    count in `counts` the engine may run (`groups.spans`, `buckets.cut`). What a graph allocates
    and frees inside its capture is not counted here: every graph shares one pool, so those
    intermediates are reused by the next capture and the largest bucket's peak, the same for any G,
    is what the reserve holds."""
    return row_bytes * sum(b for G in counts if G <= sessions for span in groups.spans(sessions, G)
                           for b in buckets.cut(bucket_sizes, span.stop - span.start))


def max_sessions(setting: int, free_bytes: int, reserve_bytes: int, per_slot_bytes: int, spare_slots: int = 0,
                 graphs: Callable[[int], int] | None = None) -> int:
    """The cap: `setting` if it fits, the derived figure if `setting` is 0; else `CapacityError`.

    S sessions cost `(S + spare_slots) x per_slot_bytes + graphs(S)` (`graph_bytes`; it grows
    with S), which must fit `free_bytes - reserve_bytes`."""
    room = free_bytes - reserve_bytes

    def cost(sessions: int) -> int:
        return (sessions + spare_slots) * per_slot_bytes + (graphs(sessions) if graphs else 0)

    derived = max(0, room // per_slot_bytes - spare_slots)
    while derived > 0 and cost(derived) > room:
        derived -= 1
    extra = (f", {spare_slots} spare slot{'s' * (spare_slots > 1)}" if spare_slots else "") + (
        f", graphs {graphs(max(derived, 1)) / GIB:.3f} GiB" if graphs else "")
    if derived < 1:
        raise CapacityError(
            f"not one session fits: {free_bytes / GIB:.2f} GiB free, {reserve_bytes / GIB:.2f} GiB "
            f"reserved, {per_slot_bytes / GIB:.3f} GiB per session{extra}")
    if setting == 0:
        return derived
    if setting > derived:
        raise CapacityError(
            f"--max-sessions {setting} does not fit: {derived} sessions fit in "
            f"{free_bytes / GIB:.2f} GiB free minus {reserve_bytes / GIB:.2f} GiB reserved, "
            f"at {per_slot_bytes / GIB:.3f} GiB per session{extra}")
    return setting
