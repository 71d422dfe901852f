"""Building blocks both transformers share: fp32 RMSNorm, gated SiLU FFN, interleaved RoPE.

Parameter names and layouts follow the checkpoint (spec personaplex §2.2), and the arithmetic
follows upstream moshi 0.2.13 operation by operation, so fp32 results agree to rounding.
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
        xf = x.float()
        var = self.eps + torch.mean(xf ** 2, dim=-1, keepdim=True)
        return (xf * (self.alpha[0].float() * torch.rsqrt(var))).to(x.dtype)


class Gating(nn.Module):
    """Gated SiLU FFN: `linear_in` gives [gate; linear] halves, `linear_out` maps back."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.linear_in = nn.Linear(dim, 2 * hidden, bias=False)
        self.linear_out = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear_in(x)
        y = y.view(*y.shape[:-1], 2, -1)
        return self.linear_out(F.silu(y[..., 0, :]) * y[..., 1, :])


def rope(x: torch.Tensor, position: torch.Tensor, max_period: float) -> torch.Tensor:
    """Rotate interleaved pairs (2i, 2i+1) of each head by `position * max_period^(-2i/D)`.

    x: [N, H, D]; position: [N] int64, one per row (rows of different sessions may sit anywhere).
    Angles and the rotation are computed in fp32, as upstream does; the result has x's dtype.
    """
    N, H, D = x.shape
    ds = torch.arange(D // 2, device=x.device, dtype=torch.float32)
    freqs = torch.exp(ds * (-math.log(max_period) * 2 / D))
    angle = position.float().view(N, 1, 1) * freqs
    cos, sin = torch.cos(angle), torch.sin(angle)
    pairs = x.view(N, H, D // 2, 2)
    xr, xi = pairs[..., 0].float(), pairs[..., 1].float()
    out = torch.stack([(xr * cos - xi * sin).to(x.dtype), (xr * sin + xi * cos).to(x.dtype)], dim=-1)
    return out.view(N, H, D)
