"""Mimi's streaming transformer: pre-norm LayerNorm, RoPE, GELU FFN, LayerScale, a 250-step ring.

Parameter names follow the checkpoint (`transformer.layers.{i}.self_attn.in_proj_weight`, ...,
spec §2.3). The ring keeps `context` steps per row. A chunk of T steps is written first and then
attended to with the window `0 <= q - k < context`, as upstream's `RingKVCache` does; so with
T = 2 per frame, once the ring is full, a frame's first step sees 249 keys, not 250. Streaming
equals upstream's streaming, not a full-sequence pass, past the window.
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


class _Stack(nn.Module):
    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_Layer(cfg) for _ in range(cfg.num_layers)])


class Transformer(nn.Module):
    """`{encoder,decoder}_transformer`: conv layout in and out ([B, C, T]), identity projections."""

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.transformer = _Stack(cfg)

    def init_ring(self, batch: int, device: torch.device) -> mimi_state.RingState:
        """A fresh KV ring for `batch` rows."""
        cfg = self.cfg
        shape = (batch, cfg.num_heads, cfg.context, cfg.dimension // cfg.num_heads)
        layers = range(cfg.num_layers)
        return mimi_state.RingState(
            keys=tuple(torch.zeros(shape, device=device) for _ in layers),
            values=tuple(torch.zeros(shape, device=device) for _ in layers),
            pos=torch.zeros(batch, dtype=torch.long, device=device),
        )

    def step(self, x: torch.Tensor, ring: mimi_state.RingState) -> torch.Tensor:
        """One chunk x [B, C, T] -> [B, C, T]; writes T steps per row into `ring` and advances it.

        The mask, the write index and the RoPE rotation are built once per chunk; each layer is
        then 13 kernels: norm, QKV, one complex RoPE for q and k, two ring writes, attention,
        the head merge, output GEMM, layer-scaled residual, norm and the three of the FFN.
        """
        cfg = self.cfg
        B, C, T = x.shape
        heads, context = cfg.num_heads, cfg.context
        head_dim = C // heads
        device = x.device
        pos = ring.pos
        steps = torch.arange(T, device=device)
        q_pos = pos.view(-1, 1) + steps  # [B, T]
        slots = q_pos % context
        # Position held by each ring slot after this chunk is written; -1 where never written.
        indexes = torch.arange(context, device=device)
        last = (pos + T - 1).view(-1, 1)
        delta = indexes - last % context
        k_pos = torch.where(delta <= 0, last + delta, last + delta - context)
        k_pos = torch.where(indexes >= (pos + T).view(-1, 1), -1, k_pos)
        distance = q_pos[:, :, None] - k_pos[:, None, :]
        mask = ((k_pos[:, None, :] >= 0) & (distance >= 0) & (distance < context))[:, None]
        # RoPE angles in fp32, frequencies 10000^(-2i/D) computed as upstream does.
        rot = blocks.rotation(q_pos.reshape(-1), head_dim, cfg.max_period).view(B, T, 1, 1, head_dim // 2)
        write = slots.view(B, 1, T, 1).expand(B, heads, T, head_dim)

        h = x.transpose(1, 2)
        for layer, keys, values in zip(self.transformer.layers, ring.keys, ring.values, strict=True):
            attn: _Attention = layer.self_attn
            qkv = F.linear(layer.norm1(h), attn.in_proj_weight).view(B, T, 3, heads, head_dim)
            qk = blocks.rope(qkv[:, :, :2], rot)
            q, k, v = qk[:, :, 0].transpose(1, 2), qk[:, :, 1].transpose(1, 2), qkv[:, :, 2].transpose(1, 2)
            keys.scatter_(2, write, k)
            values.scatter_(2, write, v)
            out = F.scaled_dot_product_attention(q, keys, values, mask)
            h = torch.addcmul(h, layer.layer_scale_1.scale, attn.out_proj(out.transpose(1, 2).reshape(B, T, C)))
            ff = layer.linear2(F.gelu(layer.linear1(layer.norm2(h))))
            h = torch.addcmul(h, layer.layer_scale_2.scale, ff)
        pos.add_(T)
        return h.transpose(1, 2)
