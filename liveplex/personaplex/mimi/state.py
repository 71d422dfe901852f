"""Per-row streaming state of Mimi: preallocated tensors with a leading row (slot) dimension.

Every tensor of a state has the rows first, so the engine can run a bucket as views of the pool
(`head(n)`), reset a newcomer's slot (`reset(rows)`), prime a decoder from a template or move a
session between slots (`copy_rows`): the slot interface every pool shares (`personaplex.slots`).
A fresh row is all zeros: the encoder's replicate-padding flag is stored as `started` so that zero
means fresh.
"""

from __future__ import annotations

import dataclasses

import torch

from liveplex.personaplex import slots


@dataclasses.dataclass(frozen=True, slots=True)
class RingState(slots.RowState):
    """KV ring of one Mimi transformer (spec §1.4: 250 steps at 25 Hz per layer)."""

    kv: tuple[torch.Tensor, ...]
    """Per layer, [B, 2, heads, context, head_dim]: K (RoPE applied) and V; slot = step mod context."""
    pos: torch.Tensor
    """[B] int64: 25 Hz steps consumed so far (the next step's position)."""


@dataclasses.dataclass(frozen=True, slots=True)
class EncoderState(slots.RowState):
    """Streaming state of the encoding path: SEANet, transformer, downsample."""

    convs: tuple[torch.Tensor, ...]
    """Windows of SEANet's convs with kernel > stride, in execution order, [B, C_in, k - s + T]:
    the left context, then the frame's chunk of T samples at that conv (`conv.CausalConv`)."""
    ring: RingState
    """Encoder transformer KV ring."""
    down: torch.Tensor
    """[B, dimension, 2 + 2]: the downsample conv's window (left context, then the frame's 2 steps)."""
    started: torch.Tensor
    """[B] bool: false until the first frame, when the downsample replicates its first input."""


@dataclasses.dataclass(frozen=True, slots=True)
class DecoderState(slots.RowState):
    """Streaming state of the decoding path: upsample, transformer, SEANet decoder."""

    up: torch.Tensor
    """[B, dimension, 2]: the depthwise upsample's overlap (kernel - stride outputs)."""
    ring: RingState
    """Decoder transformer KV ring."""
    convs: tuple[torch.Tensor, ...]
    """SEANet decoder: conv windows and transposed-conv overlaps, in execution order."""


@dataclasses.dataclass(frozen=True, slots=True)
class MimiState(slots.RowState):
    """Everything a Mimi session keeps between frames (≈19.6 MB per row for the real codec)."""

    encoder: EncoderState
    decoder: DecoderState
