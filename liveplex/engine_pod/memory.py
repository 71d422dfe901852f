"""The session cap from device memory (spec personaplex §5.12), as pure arithmetic.

After weights and voice prefixes are resident: derived = floor((free - reserve) / per_slot).
"""

from __future__ import annotations

from dataclasses import dataclass

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


def max_sessions(setting: int, free_bytes: int, reserve_bytes: int, per_slot_bytes: int) -> int:
    """The cap: `setting` if it fits, the derived figure if `setting` is 0; else `CapacityError`."""
    derived = max(0, (free_bytes - reserve_bytes) // per_slot_bytes)
    if derived < 1:
        raise CapacityError(
            f"not one session fits: {free_bytes / GIB:.2f} GiB free, {reserve_bytes / GIB:.2f} GiB "
            f"reserved, {per_slot_bytes / GIB:.3f} GiB per session")
    if setting == 0:
        return derived
    if setting > derived:
        raise CapacityError(
            f"--max-sessions {setting} does not fit: {derived} sessions fit in "
            f"{free_bytes / GIB:.2f} GiB free minus {reserve_bytes / GIB:.2f} GiB reserved, "
            f"at {per_slot_bytes / GIB:.3f} GiB per session")
    return setting
