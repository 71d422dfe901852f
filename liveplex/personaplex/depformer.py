"""The depformer: a small transformer over the codebooks of one frame, with weights per step.

Step s predicts codebook s of the frame (0..7 agent, 8..15 user) from the temporal output and the
previous step's token. It attends causally over the earlier steps of the same frame only, with no
positional encoding; its KV lives for one frame. `steps` says how many steps are resident: 16 for
parity tests (the checkpoint layout), 8 for the live engine, which never runs the user steps
(Decision D1) — with 8 steps the parameter shapes are exactly Moshi's 8-step layout.

Parameter names are the checkpoint's (spec personaplex §2.2). The per-step attention weights are
stacked row-wise as in the file: step s owns `in_proj_weight` rows [3·d·s, 3·d·(s+1)) and
`out_proj.weight` rows [d·s, d·(s+1)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from liveplex.personaplex import blocks
from liveplex.personaplex.config import RMS_EPS, LMConfig


class _StackedWeight(nn.Module):
    def __init__(self, rows: int, cols: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, cols))


class _Attention(nn.Module):
    def __init__(self, dim: int, steps: int) -> None:
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(steps * 3 * dim, dim))
        self.out_proj = _StackedWeight(steps * dim, dim)


class _Layer(nn.Module):
    def __init__(self, cfg: LMConfig, steps: int) -> None:
        super().__init__()
        self.self_attn = _Attention(cfg.dep_dim, steps)
        # One norm pair per layer, shared by every step.
        self.norm1 = blocks.RMSNorm(cfg.dep_dim, RMS_EPS)
        self.norm2 = blocks.RMSNorm(cfg.dep_dim, RMS_EPS)
        self.gating = blocks.Stack(blocks.Gating(cfg.dep_dim, cfg.dep_hidden) for _ in range(steps))


class _Transformer(nn.Module):
    def __init__(self, cfg: LMConfig, steps: int) -> None:
        super().__init__()
        self.layers = blocks.Stack(_Layer(cfg, steps) for _ in range(cfg.dep_num_layers))


FrameKV = list[torch.Tensor]
"""Per layer, [steps, B, 3, H, D]: the Q, K and V of each step run so far in this frame (step s's
QKV GEMM writes its slot directly, so keeping K and V costs no copy)."""


class Depformer(nn.Module):
    """Input projections, token embeddings, the per-step layers and the per-step heads."""

    def __init__(self, cfg: LMConfig, steps: int) -> None:
        super().__init__()
        assert 1 <= steps <= cfg.dep_steps
        self.cfg = cfg
        self.steps = steps
        d = cfg.dep_dim
        self.depformer_in = blocks.Stack(nn.Linear(cfg.dim, d, bias=False) for _ in range(steps))
        self.depformer_text_emb = nn.Embedding(cfg.text_card + 1, d)
        self.depformer_emb = blocks.Stack(nn.Embedding(cfg.card + 1, d) for _ in range(steps - 1))
        self.depformer = _Transformer(cfg, steps)
        self.linears = blocks.Stack(nn.Linear(d, cfg.card, bias=False) for _ in range(steps))

    def new_frame(self, batch: int) -> FrameKV:
        """Per-frame KV for `batch` rows (uninitialised: step s writes slot s before reading it);
        call once per frame before step 0."""
        cfg, weight = self.cfg, self.depformer_in[0].weight
        shape = (self.steps, batch, 3, cfg.dep_num_heads, cfg.dep_dim // cfg.dep_num_heads)
        return [torch.empty(shape, dtype=weight.dtype, device=weight.device) for _ in range(cfg.dep_num_layers)]

    @torch.no_grad()
    def step(self, s: int, h: torch.Tensor, prev: torch.Tensor, kv: FrameKV) -> torch.Tensor:
        """Run step s for B rows and return its logits [B, card] in fp32 (inference only: its QKV
        GEMM writes the frame's KV in place).

        h: [B, dim], the temporal output after `out_norm`; prev: [B] int64, the frame's text token
        for s = 0, else step s-1's token; kv: this frame's KV, written in place at step s.
        """
        cfg = self.cfg
        B = h.shape[0]
        d = cfg.dep_dim
        token = self.depformer_text_emb(prev) if s == 0 else self.depformer_emb[s - 1](prev)
        x = blocks.residual(token, h, self.depformer_in[s].weight)
        for layer, frame in zip(self.depformer.layers, kv):
            w_in = layer.self_attn.in_proj_weight[3 * d * s: 3 * d * (s + 1)]
            torch.mm(layer.norm1(x), w_in.t(), out=frame[s].view(B, 3 * d))
            if s == 0:  # attention over one key is its value, exactly (a softmax of one score is 1)
                a = frame[0].view(B, 3, d)[:, 2]
            else:
                keys, values = frame[:s + 1, :, 1].permute(1, 2, 0, 3), frame[:s + 1, :, 2].permute(1, 2, 0, 3)
                a = F.scaled_dot_product_attention(frame[s, :, 0, :, None], keys, values).view(B, d)
            w_out = layer.self_attn.out_proj.weight[d * s: d * (s + 1)]
            x = blocks.residual(x, a, w_out)
            x = layer.gating[s].add_to(x, layer.norm2(x))
        return blocks.linear_fp32(x, self.linears[s].weight)
