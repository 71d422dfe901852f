"""The temporal transformer (Helium backbone), batched over sessions at different positions.

Input rows are summed stream embeddings; each row carries its own position (RoPE angle and ring
slot). Two entry points share the layers and differ only in attention:

- `step`: one row per session for sessions in pool slots 0..B-1 (the live tick), batched;
- `forward_rows`: packed rows of several sessions, each a run of consecutive positions in its own
  slot (the ragged prefill). Projections and FFNs run on all rows at once; attention loops over
  the sessions.

Parameter names are the checkpoint's (spec personaplex §2.2), so `state_dict()` keys are the file's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch
from torch import nn

from liveplex.personaplex import blocks, ring
from liveplex.personaplex.config import RMS_EPS, LMConfig

# (layer index, q, k, v) -> attention output, all [N, H, D]
_Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclasses.dataclass(frozen=True, slots=True)
class Segment:
    """Consecutive rows of one session in a packed prefill: positions start..start+length-1."""

    slot: int
    start: int
    length: int


class _Attention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.out_proj = nn.Linear(dim, dim, bias=False)


class _Layer(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.self_attn = _Attention(cfg.dim)
        self.norm1 = blocks.RMSNorm(cfg.dim, RMS_EPS)
        self.norm2 = blocks.RMSNorm(cfg.dim, RMS_EPS)
        self.gating = blocks.Gating(cfg.dim, cfg.hidden)


class _Transformer(nn.Module):
    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_Layer(cfg) for _ in range(cfg.num_layers))


class Temporal(nn.Module):
    """Embeddings, the temporal layers, `out_norm` and the text head."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.emb = nn.ModuleList(nn.Embedding(cfg.card + 1, cfg.dim) for _ in range(cfg.n_q))
        self.text_emb = nn.Embedding(cfg.text_card + 1, cfg.dim)
        self.transformer = _Transformer(cfg)
        self.out_norm = blocks.RMSNorm(cfg.dim, RMS_EPS)
        self.text_linear = nn.Linear(cfg.dim, cfg.text_card, bias=False)

    def new_pool(self, slots: int, dtype: torch.dtype | None = None) -> ring.KVPool:
        """Allocate KV rings for `slots` sessions on this module's device (dtype: the weights')."""
        weight = self.text_linear.weight
        return ring.KVPool(self.cfg.num_layers, slots, self.cfg.num_heads, self.cfg.context,
                           self.cfg.head_dim, dtype or weight.dtype, weight.device)

    def embed(self, columns: torch.Tensor) -> torch.Tensor:
        """Sum of the 17 stream embeddings of each column: [N, 17] int64 -> [N, dim].

        Audio streams are summed first, then text, in upstream's order (fp32 rounding parity).
        """
        assert columns.dim() == 2 and columns.shape[1] == 1 + self.cfg.n_q, \
            f"columns are {tuple(columns.shape)}, expected [N, {1 + self.cfg.n_q}]"
        x = self.emb[0](columns[:, 1])
        for q in range(1, self.cfg.n_q):
            x = x + self.emb[q](columns[:, 1 + q])
        return x + self.text_emb(columns[:, 0])

    def text_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Text head on `out_norm`ed rows: [N, dim] -> [N, text_card], fp32."""
        return self.text_linear(h).float()

    def step(self, x: torch.Tensor, position: torch.Tensor, pool: ring.KVPool) -> torch.Tensor:
        """One live row per session, sessions in pool slots 0..B-1.

        x: [B, dim] input embeddings; position: [B] int64. Writes each row's K/V into its ring and
        returns `out_norm(h)` [B, dim].
        """
        B = x.shape[0]

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return ring.write_and_attend(q, k, v, pool.k[layer][:B], pool.v[layer][:B], position)

        return self._run(x, position, attend)

    def forward_rows(self, x: torch.Tensor, segments: Sequence[Segment], pool: ring.KVPool) -> torch.Tensor:
        """Packed rows of several sessions (a ragged prefill).

        x: [N, dim] with N = sum of segment lengths, in segment order. Each segment's K/V goes to
        its slot; each row attends to its own session's window only. Returns `out_norm(h)` [N, dim].
        """
        assert x.shape[0] == sum(s.length for s in segments), "rows do not match the segments"
        position = torch.cat([torch.arange(s.start, s.start + s.length, device=x.device) for s in segments])
        bounds = [0]
        for s in segments:
            bounds.append(bounds[-1] + s.length)

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            outs = [
                ring.attend_rows(q[a:b], k[a:b], v[a:b], pool.k[layer][s.slot], pool.v[layer][s.slot], s.start)
                for s, a, b in zip(segments, bounds, bounds[1:])
            ]
            return torch.cat(outs)

        return self._run(x, position, attend)

    def _run(self, x: torch.Tensor, position: torch.Tensor, attend: _Attend) -> torch.Tensor:
        cfg = self.cfg
        N = x.shape[0]
        for i, layer in enumerate(self.transformer.layers):
            y = layer.norm1(x)
            qkv = nn.functional.linear(y, layer.self_attn.in_proj_weight).view(N, 3, cfg.num_heads, cfg.head_dim)
            q = blocks.rope(qkv[:, 0], position, cfg.max_period)
            k = blocks.rope(qkv[:, 1], position, cfg.max_period)
            a = attend(i, q, k, qkv[:, 2]).to(x.dtype)
            x = x + layer.self_attn.out_proj(a.reshape(N, cfg.dim))
            x = x + layer.gating(layer.norm2(x))
        return self.out_norm(x)
