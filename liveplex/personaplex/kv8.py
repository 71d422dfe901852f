"""The 8-bit KV ring's number format: e4m3 (`torch.float8_e4m3fn`), one fixed scale per layer, K or V, and head.

Why fixed scales derived from the weights (issue 36), not tracked amax:

- e4m3 is a floating-point format: its relative precision (3 mantissa bits) is the same from 2^-6 to
  448, so a scale only has to keep a head's values below 448 and most of them above 2^-6. A bound
  with a generous margin costs no precision; an overflow costs a lot (saturation).
- Such a bound follows from the weights alone. A layer's K and V rows are `W (alpha * x / rms(x))`
  (`norm1`, then the QKV projection), and `||x / rms(x)|| <= sqrt(dim)`, so by Cauchy-Schwarz
  `|k_j| <= sqrt(dim) ||W_j * alpha||`; RoPE turns pairs (2i, 2i+1) of K, so a rotated K entry is
  bounded by its pair's norm. The largest bound in a head, over 448, rounded up to a power of two,
  is its scale: no value can saturate (whatever the caller says), and dividing by a power of two
  is exact, so the scale adds no rounding of its own.
- A ring is rebuilt from the session's history on a handover or resume (a prefill on another
  pod). Scales that depend only on the checkpoint are the same on every pod, at every position and
  in any batch, so the rebuilt ring is the one the session had; tracked (amax) scales would depend
  on what the session said and when, and a rescale would rewrite the whole ring.
- Per head because heads differ by orders of magnitude in trained models; it costs nothing: the K
  scale folds into q before the product and the V scale multiplies the output, per head.

Attention therefore reads the fp8 values as they are (a cast to the compute dtype is exact) with
`q * scale_k` and multiplies its output by `scale_v`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

FP8 = torch.float8_e4m3fn
E4M3_MAX = 448.0
"""The largest finite e4m3 value."""


def is_fp8(dtype: torch.dtype) -> bool:
    return dtype == FP8


def scales(in_proj: Sequence[torch.Tensor], alphas: Sequence[torch.Tensor], heads: int) -> torch.Tensor:
    """Each layer's power-of-two scales of K and V per head, `[layers, 2, heads, 1]` fp32.

    in_proj: each layer's QKV weight `[3 dim, dim]` (q, k, v rows); alphas: each layer's `norm1`
    gain `[dim]`. K's bound is per RoPE pair (the rotation mixes the pair), V's per row.
    """
    out = []
    for weight, alpha in zip(in_proj, alphas, strict=True):
        dim = weight.shape[1]
        rows = (weight[dim:].float() * alpha.float().reshape(1, dim)).square().sum(1)  # [2 dim]
        k, v = rows.view(2, heads, -1)
        pairs = k.view(heads, -1, 2).sum(-1)  # a pair's squared norm, [heads, D / 2]
        bound = torch.stack([pairs.amax(-1), v.amax(-1)]).sqrt() * math.sqrt(dim)  # [2, heads]
        tiny = torch.finfo(torch.float32).tiny
        out.append(torch.exp2(torch.ceil(torch.log2(bound.clamp(min=tiny) / E4M3_MAX))))
    return torch.stack(out)[..., None]


def quantize(kv: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """K and V rows `[N, 2, H, D]` times the layer's inverse scales `[2, H, 1]`, to e4m3 (rounded to
    nearest even; torch's cast saturates at +-448, where the bound keeps every value anyway)."""
    return (kv * inverse).to(FP8)

