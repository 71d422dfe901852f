"""Building blocks both transformers share: RMSNorm, gated SiLU FFN, interleaved RoPE.

Parameter names and layouts follow the checkpoint (spec personaplex §2.2), and the arithmetic
follows upstream moshi 0.2.13, so fp32 results agree to rounding. Each block is written as the
fewest kernels the arithmetic allows (issue 14): RMSNorm is `F.rms_norm` (one fused kernel on
CUDA, computing in fp32 whatever the input dtype), RoPE takes a rotation table built once per
forward and rotates q and k together as one complex product, and residual adds ride on the
output projection's GEMM (`residual`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


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


def logits(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A head's logits in fp32 (spec §5.8): `h @ weight.T` [N, V]. With bf16 weights the GEMM writes
    its fp32 accumulator out (`mm` with `out_dtype`, CUDA) instead of rounding it to bf16 first."""
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
        """`silu(gate) * linear` of x [N, dim]: the input of `linear_out`."""
        y = self.linear_in(x)
        y = y.view(*y.shape[:-1], 2, -1)
        return F.silu(y[..., 0, :]) * y[..., 1, :]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_out(self.hidden(x))

    def add_to(self, x: torch.Tensor, normed: torch.Tensor) -> torch.Tensor:
        """`x + self(normed)` with the add inside the output GEMM (x, normed: [N, dim])."""
        return residual(x, self.hidden(normed), self.linear_out.weight)


def rotation(position: torch.Tensor, head_dim: int, max_period: float) -> torch.Tensor:
    """RoPE angles of each row as unit complex numbers: position [N] int64 -> [N, 1, 1, D/2] complex64.

    Angles are `position * max_period^(-2i/D)` in fp32, with cos and sin computed as upstream does.
    """
    ds = torch.arange(head_dim // 2, device=position.device, dtype=torch.float32)
    freqs = torch.exp(ds * (-math.log(max_period) * 2 / head_dim))
    angle = position.float()[:, None] * freqs
    return torch.complex(torch.cos(angle), torch.sin(angle))[:, None, None, :]


def rope(x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs (2i, 2i+1) of each head by the row's angles, in fp32.

    x: [N, k, H, D] (q and k side by side, k = 2, or one of them); rot: `rotation(...)` of the N
    rows. The complex product is the upstream formula `(xr cos - xi sin, xr sin + xi cos)` with the
    same roundings. Returns x's shape, contiguous, in x's dtype.
    """
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rot).flatten(-2).to(x.dtype)
