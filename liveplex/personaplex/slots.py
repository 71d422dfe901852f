"""Per-slot state: dataclasses of tensors with the slot (row) dimension first, and one interface
to view, reset and copy rows.

Every pool a session owns a row of (the temporal KV ring, Mimi's streaming state, the token
state) is such a dataclass, so the engine resets a newcomer's slot, primes a decoder and moves a
session between slots the same way for all of them. Rows are given as a `slice` (what the engine
uses: slots are contiguous, and a slice needs no index tensor, so no host-to-device copy), as an
index tensor on the state's device, or as a list of ints (one host-to-device copy per call).
A fresh row is all zeros. A field whose metadata says `per_slot: False` (the 8-bit ring's scales)
belongs to the whole state and is left out of every row operation. One-byte float tensors (e4m3)
are reset and copied through a `uint8` view of their bits: the CPU has no index kernels for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

Rows = slice | torch.Tensor | Sequence[int]
"""Row indices: a slice, a 1-D integer tensor, or a list of ints."""

_S = TypeVar("_S")


def _map(state: _S, fn: Callable[[torch.Tensor], torch.Tensor]) -> _S:
    """Rebuild a state dataclass (nested, with tuples of tensors) with `fn` applied to each tensor."""
    if isinstance(state, torch.Tensor):
        return fn(state)
    if isinstance(state, tuple):
        return tuple(_map(item, fn) for item in state)  # type: ignore[return-value]
    changes = {f.name: _map(getattr(state, f.name), fn) for f in dataclasses.fields(state)  # type: ignore[arg-type]
               if f.metadata.get("per_slot", True)}
    return dataclasses.replace(state, **changes)  # type: ignore[type-var]


def tensors(state: object) -> list[torch.Tensor]:
    """Every tensor of a state, in field order."""
    found: list[torch.Tensor] = []
    _map(state, lambda t: found.append(t) or t)
    return found


SHARED = {"per_slot": False}
"""Field metadata of a state tensor that is not per slot (no row dimension)."""


def _bits(t: torch.Tensor) -> torch.Tensor:
    """t, or its bits as `uint8` where t holds one-byte floats (copies and zeros are the same)."""
    return t.view(torch.uint8) if t.is_floating_point() and t.element_size() == 1 else t


def _index(rows: Rows, device: torch.device) -> slice | torch.Tensor:
    if isinstance(rows, slice):
        return rows
    if isinstance(rows, torch.Tensor):
        return rows.to(device)
    return torch.as_tensor(rows, dtype=torch.long).to(device).reshape(-1)


class RowState:
    """Row operations shared by every per-slot state dataclass."""

    __slots__ = ()

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the state, in a fixed order (rows first in each)."""
        return tensors(self)

    @property
    def batch(self) -> int:
        """Rows in this state."""
        return tensors(self)[0].shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes held, all rows together."""
        return sum(t.numel() * t.element_size() for t in tensors(self))

    def reset(self, rows: Rows) -> None:
        """Make `rows` fresh (zeros, as allocated); other rows are not touched."""
        all_ = tensors(self)
        index = _index(rows, all_[0].device)
        for tensor in map(_bits, all_):
            if isinstance(index, slice):
                tensor[index].zero_()
            else:
                tensor.index_fill_(0, index, 0)

    def copy_rows(self, rows: Rows, source: RowState, source_rows: Rows, non_blocking: bool = False) -> None:
        """Copy `source`'s `source_rows` into this state's `rows` (priming, slot compaction);
        `non_blocking` from pinned host rows: queued on the current stream, not waited for."""
        mine, theirs = tensors(self), tensors(source)
        assert len(mine) == len(theirs), "states of different shapes"
        dst, src = _index(rows, mine[0].device), _index(source_rows, theirs[0].device)
        for d, s in zip(map(_bits, mine), map(_bits, theirs), strict=True):
            values = s[src] if isinstance(src, slice) else s.index_select(0, src)
            if isinstance(dst, slice):
                d[dst].copy_(values, non_blocking=non_blocking)
            else:
                d.index_copy_(0, dst, values)

    def rows(self: _S, rows: slice) -> _S:
        """Views of `rows`: a tick group's part of the pool, run as a state of its own."""
        return _map(self, lambda t: t[rows])

    def head(self: _S, n: int) -> _S:
        """Views of the first `n` rows: running a bucket on them updates this state in place."""
        return _map(self, lambda t: t[:n])

    def parked(self: _S, row: int, non_blocking: bool = False) -> _S:
        """A host copy of row `row` (one row; pinned when the state is on CUDA, so the copy back
        is a DMA): a paused session's part, off the device until `copy_rows` lays it back.
        `non_blocking` (CUDA): queued on the current stream, its values there once the stream did it."""

        def host(t: torch.Tensor) -> torch.Tensor:
            src = t[row:row + 1]
            copy = torch.empty(src.shape, dtype=src.dtype, device="cpu", pin_memory=src.is_cuda)
            _bits(copy).copy_(_bits(src), non_blocking=non_blocking)
            return copy

        return _map(self, host)

    def clone(self: _S) -> _S:
        """A deep copy (for snapshots in tests and templates)."""
        return _map(self, torch.clone)
