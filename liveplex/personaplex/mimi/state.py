"""Per-row streaming state of Mimi: preallocated tensors with a leading row (slot) dimension.

Every tensor of a state has the rows first, so the engine can run a bucket as views of the pool
(`head(n)`), reset a newcomer's slot (`reset(rows)`), prime a decoder from a template or move a
session between slots (`copy_rows`). All three touch only the named rows. A fresh row is all
zeros: the encoder's replicate-padding flag is stored as `started` so that zero means fresh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

Rows = Sequence[int] | torch.Tensor
"""Row indices: a list of ints or a 1-D integer tensor."""

_S = TypeVar("_S")


def _map(state: _S, fn: Callable[[torch.Tensor], torch.Tensor]) -> _S:
    """Rebuild a state dataclass (nested, with tuples of tensors) with `fn` applied to each tensor."""
    if isinstance(state, torch.Tensor):
        return fn(state)  # type: ignore[return-value]
    if isinstance(state, tuple):
        return tuple(_map(item, fn) for item in state)  # type: ignore[return-value]
    changes = {f.name: _map(getattr(state, f.name), fn) for f in dataclasses.fields(state)}  # type: ignore[arg-type]
    return dataclasses.replace(state, **changes)  # type: ignore[type-var]


def _tensors(state: object) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    _map(state, lambda t: found.append(t) or t)
    return found


def _index(rows: Rows, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(rows, dtype=torch.long).to(device).reshape(-1)


class _RowState:
    """Row operations shared by every Mimi state dataclass."""

    __slots__ = ()

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the state, in a fixed order (rows first in each)."""
        return _tensors(self)

    @property
    def batch(self) -> int:
        """Rows in this state."""
        return _tensors(self)[0].shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes held, all rows together."""
        return sum(t.numel() * t.element_size() for t in _tensors(self))

    def reset(self, rows: Rows) -> None:
        """Make `rows` fresh (as after `init_state`); other rows are not touched."""
        for tensor in _tensors(self):
            tensor.index_fill_(0, _index(rows, tensor.device), 0)

    def copy_rows(self, rows: Rows, source: _RowState, source_rows: Rows) -> None:
        """Copy `source`'s `source_rows` into this state's `rows` (priming, slot compaction)."""
        for dst, src in zip(_tensors(self), _tensors(source), strict=True):
            dst.index_copy_(0, _index(rows, dst.device), src.index_select(0, _index(source_rows, src.device)))

    def head(self: _S, n: int) -> _S:
        """Views of the first `n` rows: running a bucket on them updates this state in place."""
        return _map(self, lambda t: t[:n])

    def clone(self: _S) -> _S:
        """A deep copy (for snapshots in tests and templates)."""
        return _map(self, torch.clone)


@dataclasses.dataclass(frozen=True, slots=True)
class RingState(_RowState):
    """KV ring of one Mimi transformer (spec §1.4: 250 steps at 25 Hz per layer)."""

    keys: tuple[torch.Tensor, ...]
    """Per layer, [B, heads, context, head_dim], RoPE applied; slot = step mod context."""
    values: tuple[torch.Tensor, ...]
    """Per layer, [B, heads, context, head_dim]."""
    pos: torch.Tensor
    """[B] int64: 25 Hz steps consumed so far (the next step's position)."""


@dataclasses.dataclass(frozen=True, slots=True)
class EncoderState(_RowState):
    """Streaming state of the encoding path: SEANet, transformer, downsample."""

    convs: tuple[torch.Tensor, ...]
    """Left contexts of SEANet's convs with kernel > stride, in execution order, [B, C_in, k - s]."""
    ring: RingState
    """Encoder transformer KV ring."""
    down: torch.Tensor
    """[B, dimension, 2]: the downsample conv's left context."""
    started: torch.Tensor
    """[B] bool: false until the first frame, when the downsample replicates its first input."""


@dataclasses.dataclass(frozen=True, slots=True)
class DecoderState(_RowState):
    """Streaming state of the decoding path: upsample, transformer, SEANet decoder."""

    up: torch.Tensor
    """[B, dimension, 2]: the depthwise upsample's overlap (kernel - stride outputs)."""
    ring: RingState
    """Decoder transformer KV ring."""
    convs: tuple[torch.Tensor, ...]
    """SEANet decoder: conv left contexts and transposed-conv overlaps, in execution order."""


@dataclasses.dataclass(frozen=True, slots=True)
class MimiState(_RowState):
    """Everything a Mimi session keeps between frames (≈16.5 MB per row for the real codec)."""

    encoder: EncoderState
    decoder: DecoderState
