"""Mimi's streaming transformer: pre-norm LayerNorm, RoPE, GELU FFN, LayerScale, a 250-step ring.

Parameter names follow the checkpoint (`transformer.layers.{i}.self_attn.in_proj_weight`, ...,
spec §2.3). The ring keeps `context` steps per row. A chunk of T steps is written first and then
attended to with the window `0 <= q - k < context`, as upstream's `RingKVCache` does; so with
T = 2 per frame, once the ring is full, a frame's first step sees 249 keys, not 250. Streaming
equals upstream's streaming, not a full-sequence pass, past the window.

Each layer is ten kernels (issue 14): norm, QKV, one complex RoPE that rotates q and k and carries
v, one ring write of K and V, attention, the output GEMM with the residual, norm and the three of
the FFN. LayerScale rides on the GEMMs: `refresh` folds each scale into a copy of its projection
(`scale * (y @ W.T)` becomes `y @ (scale * W).T`, fp32 either way).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from liveplex.personaplex import blocks
from liveplex.personaplex.mimi import config as mimi_config
from liveplex.personaplex.mimi import state as mimi_state


class _Attention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.out_proj = nn.Linear(dim, dim, bias=False)


class _LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))


class _Layer(nn.Module):
    out_scaled: torch.Tensor
    linear2_scaled: torch.Tensor

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        dim = cfg.dimension
        self.self_attn = _Attention(dim)
        self.norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.norm2 = nn.LayerNorm(dim, eps=1e-5)
        self.linear1 = nn.Linear(dim, cfg.dim_feedforward, bias=False)
        self.linear2 = nn.Linear(cfg.dim_feedforward, dim, bias=False)
        self.layer_scale_1 = _LayerScale(dim)
        self.layer_scale_2 = _LayerScale(dim)
        self.register_buffer("out_scaled", torch.empty(dim, dim), persistent=False)
        self.register_buffer("linear2_scaled", torch.empty(dim, cfg.dim_feedforward), persistent=False)

    def refresh(self) -> None:
        """The output projections with their LayerScale folded in, from the parameters."""
        self.out_scaled.copy_(self.layer_scale_1.scale[:, None] * self.self_attn.out_proj.weight)
        self.linear2_scaled.copy_(self.layer_scale_2.scale[:, None] * self.linear2.weight)


class _Stack(nn.Module):
    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.layers = blocks.Stack([_Layer(cfg) for _ in range(cfg.num_layers)])


class Transformer(nn.Module):
    """`{encoder,decoder}_transformer`: conv layout in and out ([B, C, T]), identity projections."""

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.transformer = _Stack(cfg)
        self.rotary = blocks.Rotary(cfg.dimension // cfg.num_heads, cfg.max_period)

    @torch.no_grad()
    def refresh(self) -> None:
        """Recompute the folded weights from the parameters (after loading)."""
        for layer in self.transformer.layers:
            layer.refresh()

    def init_ring(self, batch: int, device: torch.device) -> mimi_state.RingState:
        """A fresh KV ring for `batch` rows."""
        cfg = self.cfg
        shape = (batch, 2, cfg.num_heads, cfg.context, cfg.dimension // cfg.num_heads)
        return mimi_state.RingState(
            kv=tuple(torch.zeros(shape, device=device) for _ in range(cfg.num_layers)),
            pos=torch.zeros(batch, dtype=torch.long, device=device),
        )

    def step(self, x: torch.Tensor, ring: mimi_state.RingState) -> torch.Tensor:
        """One chunk x [B, C, T] -> [B, C, T]; writes T steps per row into `ring` and advances it.

        The mask, the write index and the RoPE rotation are built once per chunk.
        """
        cfg = self.cfg
        B, C, T = x.shape
        heads, context = cfg.num_heads, cfg.context
        head_dim = C // heads
        steps = torch.arange(T, device=x.device)
        q_pos = ring.pos[:, None] + steps  # [B, T]
        write = (q_pos % context).view(B, 1, 1, T, 1).expand(B, 2, heads, T, head_dim)
        mask = window(q_pos, steps, context)
        rot = self.rotary.rotation(q_pos.view(-1)).view(B, T, 3, 1, head_dim // 2)

        h = x.transpose(1, 2).contiguous().view(B * T, C)
        for layer, kv in zip(self.transformer.layers, ring.kv, strict=True):
            qkv = F.linear(layer.norm1(h), layer.self_attn.in_proj_weight).view(B, T, 3, heads, head_dim)
            qkv = blocks.rope(qkv, rot)
            kv.scatter_(3, write, qkv[:, :, 1:].permute(0, 2, 3, 1, 4))
            out = F.scaled_dot_product_attention(qkv[:, :, 0].transpose(1, 2), kv[:, 0], kv[:, 1], mask)
            h = blocks.residual(h, out.transpose(1, 2).reshape(B * T, C), layer.out_scaled)
            h = blocks.residual(h, F.gelu(layer.linear1(layer.norm2(h))), layer.linear2_scaled)
        ring.pos.add_(T)
        return h.view(B, T, C).transpose(1, 2)


def window(q_pos: torch.Tensor, steps: torch.Tensor, context: int) -> torch.Tensor:
    """Which ring slots each of a chunk's T queries attends to once the chunk is written: [B, 1, T, context].

    q_pos: [B, T], the queries' positions; steps: `arange(T)`. Slot j then holds position
    `last - d` with `last` the chunk's last position and `d = (last - j) mod context`; query t
    (at `last - (T - 1 - t)`) sees it when it was ever written (`d <= last`) and is not in its
    future (`d >= T - 1 - t`); the window `q - k < context` then always holds.
    """
    T = steps.shape[0]
    last = q_pos[:, T - 1:]
    d = torch.remainder(last - torch.arange(context, device=q_pos.device), context)  # [B, context]
    lag = (T - 1) - steps
    return ((d <= last)[:, None, :] & (d[:, None, :] >= lag[:, None]))[:, None]
