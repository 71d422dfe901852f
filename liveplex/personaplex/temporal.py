"""The temporal transformer (Helium backbone), batched over sessions at different positions.

Input rows are summed stream embeddings; each row carries its own position (RoPE angle and ring
slot). One forward serves both uses, and differs only in its `ring.Plan`:

- the live tick: one row per session for sessions in pool slots 0..B-1 (`ring.live_plan`);
- a prefill: packed runs of consecutive positions, one run per session in its own slot
  (`ring.rows_plan`), projections and FFNs on all rows at once.

The plan and the RoPE rotation are computed once per forward, not per layer. Each layer's QKV GEMM
leaves fp32 (`blocks.linear_fp32`), RoPE rotates q and k in it and rounds q, k and v to the pool's
dtype once, and one index copy stores K and V (issue 14). An e4m3 pool (`kv8`, issue 36) gets q, k
and v in the weights' dtype and quantizes K and V as it stores them.

Parameter names are the checkpoint's (spec personaplex §2.2), so `state_dict()` keys are the file's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Self

import torch
from torch import nn

from liveplex.personaplex import blocks, kv8, ring
from liveplex.personaplex.config import RMS_EPS, LMConfig


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
        self.layers = blocks.Stack(_Layer(cfg) for _ in range(cfg.num_layers))


class Temporal(nn.Module):
    """Embeddings, the temporal layers, `out_norm` and the text head.

    The 17 embedding tables (text, then audio streams 0..15) are views of one table, rebuilt on
    every move, cast or `to_empty` (`_apply`), so that a column's embeddings are one lookup; the
    parameters, their names and loading are the checkpoint's as before.
    """

    _table: torch.Tensor
    """[text_card + 1 + 16 (card + 1), dim]: every embedding table, end to end."""
    _offsets: torch.Tensor
    """[17] int64: where each stream's table starts in `_table`."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.emb = blocks.Stack(nn.Embedding(cfg.card + 1, cfg.dim) for _ in range(cfg.n_q))
        self.text_emb = nn.Embedding(cfg.text_card + 1, cfg.dim)
        self.transformer = _Transformer(cfg)
        self.out_norm = blocks.RMSNorm(cfg.dim, RMS_EPS)
        self.text_linear = nn.Linear(cfg.dim, cfg.text_card, bias=False)
        self.rotary = blocks.Rotary(cfg.head_dim, cfg.max_period)
        self._stack_embeddings()

    def _stack_embeddings(self) -> None:
        tables = [self.text_emb, *self.emb]
        self._table = torch.cat([e.weight.detach() for e in tables])
        starts = [0]
        for e in tables:
            e.weight = nn.Parameter(self._table[starts[-1]:starts[-1] + e.num_embeddings], e.weight.requires_grad)
            starts.append(starts[-1] + e.num_embeddings)
        self._offsets = torch.tensor(starts[:-1], device=self._table.device)

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Self:
        super()._apply(fn, recurse)
        self._stack_embeddings()
        return self

    def new_pool(self, slots: int, dtype: torch.dtype | None = None) -> ring.KVPool:
        """Allocate KV rings for `slots` sessions on this module's device (dtype: the weights', or
        `kv8.FP8`: an e4m3 pool, with the scales of these weights, `kv8.scales`)."""
        weight = self.text_linear.weight
        dtype = dtype or weight.dtype
        scale = self.kv_scales() if kv8.is_fp8(dtype) else None
        return ring.KVPool.allocate(self.cfg.num_layers, slots, self.cfg.num_heads, self.cfg.context,
                                    self.cfg.head_dim, dtype, weight.device, scale)

    def kv_scales(self) -> torch.Tensor:
        """The e4m3 ring's scales of these weights, `[layers, 2, heads, 1]` (`kv8.scales`)."""
        layers = self.transformer.layers
        return kv8.scales([la.self_attn.in_proj_weight for la in layers], [la.norm1.alpha.reshape(-1) for la in layers],
                          self.cfg.num_heads)

    def embed(self, columns: torch.Tensor) -> torch.Tensor:
        """Sum of the 17 stream embeddings of each column: [N, 17] int64 -> [N, dim].

        Audio streams are summed first, in stream order, then text, as upstream does (the sum over
        the streams accumulates in order: fp32 rounding parity), from one lookup: four kernels.
        """
        assert columns.dim() == 2 and columns.shape[1] == 1 + self.cfg.n_q, \
            f"columns are {tuple(columns.shape)}, expected [N, {1 + self.cfg.n_q}]"
        rows = nn.functional.embedding(columns + self._offsets, self._table)  # [N, 17, dim]
        return rows[:, 1:].sum(1) + rows[:, 0]

    def text_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Text head on `out_norm`ed rows: [N, dim] -> [N, text_card], fp32."""
        return blocks.linear_fp32(h, self.text_linear.weight)

    def step(self, x: torch.Tensor, position: torch.Tensor, pool: ring.KVPool,
             plan: ring.Plan | None = None) -> torch.Tensor:
        """One live row per session, sessions in pool slots 0..B-1.

        x: [B, dim] input embeddings; position: [B] int64; plan: `ring.live_plan(position, ...)`
        (default: `masked` over the whole ring). Writes each row's K/V into its ring and returns
        `out_norm(h)` [B, dim].
        """
        plan = plan or ring.live_plan(position, pool, ring.Offsets.of(pool), ring.Backend.MASKED, pool.context)
        return self.forward(x, position, pool, plan)

    def forward_rows(self, x: torch.Tensor, segments: Sequence[Segment], pool: ring.KVPool,
                     backend: ring.Backend = ring.Backend.MASKED) -> torch.Tensor:
        """Packed rows of several sessions (a ragged prefill; segments in ascending slots, none
        crossing the ring's end), from host-side segments.

        x: [N, dim] with N = sum of segment lengths, in segment order. Each segment's K/V goes to
        its slot; each row attends to its own session's window only. Returns `out_norm(h)` [N, dim].
        """
        plan, position = rows_plan(segments, pool, backend, x.device)
        return self.forward(x, position, pool, plan)

    def forward(self, x: torch.Tensor, position: torch.Tensor, pool: ring.KVPool, plan: ring.Plan) -> torch.Tensor:
        """x: [N, dim] rows at `position` [N], laid out in the ring as `plan` says -> `out_norm(h)`."""
        cfg = self.cfg
        N = x.shape[0]
        rot = self.rotary.rotation(position)
        dtype = x.dtype if pool.scale is not None else pool.kv.dtype
        for i, layer in enumerate(self.transformer.layers):
            qkv = blocks.linear_fp32(layer.norm1(x), layer.self_attn.in_proj_weight)
            qkv = blocks.rope(qkv.view(N, 3, cfg.num_heads, cfg.head_dim), rot, dtype)
            a = ring.write_and_attend(i, qkv[:, 0], qkv[:, 1:], pool, plan).to(x.dtype)
            x = blocks.residual(x, a.reshape(N, cfg.dim), layer.self_attn.out_proj.weight)
            x = layer.gating.add_to(x, layer.norm2(x))
        return self.out_norm(x)


def rows_plan(segments: Sequence[Segment], pool: ring.KVPool, backend: ring.Backend,
              device: torch.device) -> tuple[ring.Plan, torch.Tensor]:
    """The plan and row positions of host-side segments (startup and tests: the index tensors are
    made from host lists; the engine's prefill uploads them through its staging buffer instead)."""
    runs, first = [], 0
    for s in segments:
        assert s.start + s.length <= pool.context, "a prefill run cannot cross the ring's end"
        runs.append(ring.Run(s.slot, first, s.length, s.start))
        first += s.length
    position = torch.cat([torch.arange(s.start, s.start + s.length) for s in segments]).to(device)
    slot = torch.cat([torch.full((s.length,), s.slot) for s in segments]).to(device)
    cu_q = torch.tensor([0] + [r.first + r.length for r in runs], dtype=torch.int32, device=device)
    used = torch.tensor([s.start + s.length for s in segments], dtype=torch.int32, device=device)
    return ring.rows_plan(slot, position, cu_q, used, runs, pool, backend), position
