"""Building blocks both transformers share: RMSNorm, gated SiLU FFN, interleaved RoPE.

Parameter names and layouts follow the checkpoint (spec personaplex §2.2), and the arithmetic
follows upstream moshi 0.2.13, so fp32 results agree to rounding. Each block is written as the
fewest kernels the arithmetic allows (issue 14): RMSNorm is `F.rms_norm` (one fused kernel on
CUDA, computing in fp32 whatever the input dtype); RoPE's frequencies are a table built once per
model (`Rotary`), its rotation once per forward, and one complex product rotates q and k and
carries v through unchanged, so that the three leave it in one tensor; residual adds ride on the
output projection's GEMM (`residual`); the FFN's SiLU and gate are one fused kernel on CUDA
(`kernels.gate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, Self, TypeVar, cast, overload

import torch
import torch.nn.functional as F
from torch import nn

from liveplex.personaplex import kernels

M = TypeVar("M", bound=nn.Module)


class Stack(nn.ModuleList, Generic[M]):
    """An `nn.ModuleList` of one kind of module, typed as that kind: torch's yields `nn.Module`,
    through which every attribute reads as `Tensor | Module`. Parameter names (`layers.0.…`) and
    everything else are a ModuleList's."""

    def __init__(self, modules: Iterable[M]) -> None:
        super().__init__(modules)

    def __iter__(self) -> Iterator[M]:
        return cast("Iterator[M]", super().__iter__())  # torch: ModuleList is not generic

    @overload
    def __getitem__(self, idx: slice) -> Stack[M]: ...

    @overload
    def __getitem__(self, idx: int) -> M: ...

    def __getitem__(self, idx: int | slice) -> M | Stack[M]:
        return cast("M | Stack[M]", super().__getitem__(idx))  # torch: ModuleList is not generic



class RMSNorm(nn.Module):
    """`y = x * alpha * rsqrt(mean(x^2) + eps)`, computed in fp32; alpha is [1, 1, dim]."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.alpha = nn.Parameter(torch.ones(1, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.alpha[0, 0].to(x.dtype), self.eps)


def residual(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`x + y @ weight.T` as one GEMM (x, y: [N, *]; weight: [out, in])."""
    return torch.addmm(x, y, weight.t())


def linear_fp32(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`h @ weight.T` in fp32 [N, out]: with bf16 weights on CUDA the GEMM writes its fp32
    accumulator out (`mm` with `out_dtype`) instead of rounding it to bf16 first. Logits are fp32
    (spec §5.8), and so are q, k and v until RoPE has rotated them (`rope`)."""
    if h.dtype == torch.float32 or h.device.type == "cpu":
        return F.linear(h, weight).float()
    return torch.mm(h, weight.t(), out_dtype=torch.float32)


class Gating(nn.Module):
    """Gated SiLU FFN: `linear_in` gives [gate; linear] halves, `linear_out` maps back."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.linear_in = nn.Linear(dim, 2 * hidden, bias=False)
        self.linear_out = nn.Linear(hidden, dim, bias=False)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """`silu(gate) * linear` of x [N, dim]: the input of `linear_out` (one fused kernel on CUDA)."""
        return kernels.gated(self.linear_in(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_out(self.hidden(x))

    def add_to(self, x: torch.Tensor, normed: torch.Tensor) -> torch.Tensor:
        """`x + self(normed)` with the add inside the output GEMM (x, normed: [N, dim])."""
        return residual(x, self.hidden(normed), self.linear_out.weight)


class Rotary(nn.Module):
    """RoPE's frequencies `max_period^(-2i/D)`, for q and k, and 0 for v: a [3, 1, D/2] fp32 table
    on the module's device, whatever the model's dtype (recomputed, as upstream computes it, on
    every move, cast or `to_empty`; never in the checkpoint)."""

    freqs: torch.Tensor

    def __init__(self, head_dim: int, max_period: float) -> None:
        super().__init__()
        self.head_dim, self.max_period = head_dim, max_period
        self.register_buffer("freqs", self._table(None), persistent=False)

    def _table(self, device: torch.device | None) -> torch.Tensor:
        ds = torch.arange(self.head_dim // 2, device=device, dtype=torch.float32)
        freqs = torch.exp(ds * (-math.log(self.max_period) * 2 / self.head_dim))
        return torch.stack([freqs, freqs, torch.zeros_like(freqs)])[:, None, :]

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Self:
        super()._apply(fn, recurse)
        self.freqs = self._table(self.freqs.device)
        return self

    def rotation(self, position: torch.Tensor) -> torch.Tensor:
        """The rotation of each row's q, k and v: position [N] int64 -> [N, 3, 1, D/2] complex64.

        q and k turn by `position * freqs` in fp32, cos and sin computed as upstream does; v by
        angle 0, whose cos and sin are exactly 1 and 0.
        """
        angle = position.float()[:, None, None, None] * self.freqs
        return torch.complex(torch.cos(angle), torch.sin(angle))


def rope(x: torch.Tensor, rot: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Rotate interleaved pairs (2i, 2i+1) of each head by the row's angles, in fp32.

    x: [N, 3, H, D], q, k and v side by side; rot: `Rotary.rotation` of the N rows. The complex
    product is the upstream formula `(xr cos - xi sin, xr sin + xi cos)` with the same roundings,
    and leaves v as it is (`xr 1 - xi 0`, `xr 0 + xi 1`). Returns x's shape, contiguous, in
    `dtype` (default x's).
    """
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rot).flatten(-2).to(dtype or x.dtype)
