"""The per-session temporal KV ring: slot indexing, the valid window, and attention over it.

Each session owns one row of a preallocated pool, `[slots, layers, context, 2, heads, head_dim]`: K
and V of a position side by side, so that one index copy writes both, and token-major, so the pool
is one packed sequence of keys `[slots * layers * context, heads, head_dim]` and one of values for
the varlen kernel (its kv-packed layout: rows `2 * heads * head_dim` apart). Position p lives in
ring slot `p mod context` and is never moved. Keys are stored after RoPE, so attention does not
care where a position sits in the ring; it only needs the row's window (spec personaplex §3.6,
§5.6): a row at position p reads positions max(0, p - context + 1)..p, i.e. at most `context` keys,
itself included (upstream moshi 0.2.13's bounds, not the reference's off-by-one). Those always fill
a prefix of the ring: slots 0..p until the ring wraps, all of it afterwards. So a row's window is
its valid length `min(p + 1, context)`, nothing else.

The ring holds the weights' dtype, or e4m3 (`kv8`: issue 36) with fixed per-layer, per-head
scales of K and V kept beside it (`KVPool.scale`); either backend reads it.

Two interchangeable backends (spec §5.6), chosen per engine:

- `masked`: `scaled_dot_product_attention` over the leading `span` slots with a mask from each
  row's valid length: portable (CPU, golden tests, GPU fallback); it reads `span` slots per row.
- `flash`: the varlen flash kernel (`aten._flash_attention_forward` with `seqused_k`) over the
  packed rows, reading only each row's valid keys: a young row or a padding row reads almost
  nothing. CUDA only (on the CPU, `liveplex.bench.counts` runs it by a reference implementation).
  Over an e4m3 ring, `kernels.kv8.attend`: the same contract, reading the fp8 bytes directly.

What every layer of a tick needs (write index, mask or lengths) is computed once per tick
(`live_plan`, `rows_plan`), not per layer, and what does not depend on the positions (where each
slot's rings start) once per pool (`Offsets`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from liveplex.personaplex import kv8, slots
from liveplex.personaplex.kernels import kv8 as kv8_kernels


class Backend(enum.Enum):
    MASKED = "masked"
    FLASH = "flash"


def slot_of(position: torch.Tensor, context: int) -> torch.Tensor:
    """Ring slot of each position (int64 in, int64 out, same shape)."""
    return torch.remainder(position, context)


def valid_length(position: torch.Tensor, context: int) -> torch.Tensor:
    """How many leading ring slots a row at `position` [B] attends to: `min(p + 1, context)`."""
    return torch.clamp(position + 1, max=context)


def valid_slots(position: torch.Tensor, context: int, span: int | None = None) -> torch.Tensor:
    """Which of the leading `span` (default: all) ring slots a row at `position` [B] may attend to
    once its own K/V is written: [B, span] bool."""
    return torch.arange(span or context, device=position.device) < valid_length(position, context)[:, None]


@dataclasses.dataclass(frozen=True, slots=True)
class KVPool(slots.RowState):
    """Preallocated temporal K and V rings, `[slots, layers, context, 2, heads, head_dim]`.

    Allocated once at engine start and never resized; a session's row changes only through its
    own writes and the slot interface (`reset`, `copy_rows`).
    """

    kv: torch.Tensor
    scale: torch.Tensor | None = dataclasses.field(default=None, metadata=slots.SHARED)
    """e4m3 only: each layer's K and V scale per head, `[layers, 2, heads, 1]` fp32 (`kv8.scales`);
    the ring holds `value / scale`. Shared by every slot."""
    inverse: torch.Tensor | None = dataclasses.field(default=None, metadata=slots.SHARED)
    """`1 / scale` (exact: powers of two), what a write multiplies by."""

    @classmethod
    def allocate(cls, layers: int, slots_: int, heads: int, context: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str, scale: torch.Tensor | None = None) -> KVPool:
        """A zeroed pool; an e4m3 one needs its `scale`."""
        assert kv8.is_fp8(dtype) == (scale is not None), "an e4m3 ring, and only one, has scales"
        kv = torch.zeros((slots_, layers, context, 2, heads, head_dim), dtype=dtype, device=device)
        return cls(kv, scale, None if scale is None else 1.0 / scale)

    @property
    def k(self) -> torch.Tensor:
        """K, `[slots, layers, context, heads, head_dim]` (a view)."""
        return self.kv[..., 0, :, :]

    @property
    def v(self) -> torch.Tensor:
        """V, `[slots, layers, context, heads, head_dim]` (a view)."""
        return self.kv[..., 1, :, :]

    @property
    def layers(self) -> int:
        return self.kv.shape[1]

    @property
    def context(self) -> int:
        return self.kv.shape[2]

    @property
    def nbytes_per_slot(self) -> int:
        return self.nbytes // self.batch

    @property
    def packed(self) -> torch.Tensor:
        """K and V of every slot as one sequence `[slots * layers * context, 2, heads, head_dim]`."""
        S, L, C, _, H, D = self.kv.shape
        return self.kv.view(S * L * C, 2, H, D)


@dataclasses.dataclass(frozen=True, slots=True)
class Offsets:
    """Where each slot's ring of each layer starts in `KVPool.packed`: what a live tick's plan
    needs besides the positions, built once per pool (`of`), so a tick computes only its writes
    and lengths."""

    starts: torch.Tensor
    """[layers, slots + 1] int64: slot j's layer-l ring starts at `(j * layers + l) * context`;
    column `slots` is where a slot after the last would start."""
    cu_k: torch.Tensor
    """[layers, slots + 1] int32: `starts`, the last column clamped to the pool's end (varlen key
    offsets: the kernel reads `used` keys from each start; the last offset only closes the sequence)."""
    cu_q: torch.Tensor
    """[slots + 1] int32: 0..slots, the query offsets of one row per slot."""

    @classmethod
    def of(cls, pool: KVPool) -> Offsets:
        S, L, C = pool.batch, pool.layers, pool.context
        slot = torch.arange(S + 1, device=pool.kv.device)
        starts = _starts(slot, L, C)
        return cls(starts, starts.clamp(max=S * L * C).to(torch.int32), slot.to(torch.int32))


def _starts(slot: torch.Tensor, layers: int, context: int) -> torch.Tensor:
    """[layers, n] int64: where each of `slot`'s layer-l rings starts in `KVPool.packed`."""
    return (slot[None, :] * layers + torch.arange(layers, device=slot.device)[:, None]) * context


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """Where one forward's rows go in the ring and what each attends to; built once, used by every layer.

    The rows are queries grouped by session (one per session in a live tick, a run of positions
    per newcomer in a prefill). `write[l]` is each row's index in `KVPool.packed` for layer l.
    """

    backend: Backend
    rows: int
    """`masked`: slots 0..rows-1 hold every group."""
    write: torch.Tensor
    """[layers, N] int64."""
    span: int
    """`masked`: ring slots read per group."""
    mask: torch.Tensor | None
    """`masked`: [groups, 1, queries per group, span] bool."""
    cu_q: torch.Tensor | None
    """`flash`: [groups + 1] int32 query offsets."""
    cu_k: torch.Tensor | None
    """`flash`: [layers, groups + 1] int32 key offsets of each group's ring row, per layer."""
    used: torch.Tensor | None
    """`flash`: [groups] int32 valid keys per group."""
    max_q: int
    runs: Sequence[Run] = ()
    """`masked` prefill: the runs, host side."""


def live_plan(position: torch.Tensor, pool: KVPool, offsets: Offsets, backend: Backend, span: int) -> Plan:
    """One live row per slot 0..B-1 at `position` [B]; `masked` reads the leading `span` slots
    (the ring's length under a CUDA graph; on the CPU the host's bound on every row's valid length)."""
    B, C = position.shape[0], pool.context
    write = offsets.starts[:, :B] + slot_of(position, C)[None, :]
    if backend is Backend.MASKED:
        return Plan(backend, B, write, span, valid_slots(position, C, span)[:, None, None, :], None, None, None, 1)
    used = valid_length(position, C).to(torch.int32)
    return Plan(backend, B, write, C, None, offsets.cu_q[:B + 1], offsets.cu_k[:, :B + 1], used, 1)


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """Consecutive positions start..start+length-1 of the session in `slot`, rows first..first+length-1."""

    slot: int
    first: int
    length: int
    start: int


def rows_plan(slot: torch.Tensor, position: torch.Tensor, cu_q: torch.Tensor, used: torch.Tensor,
              runs: Sequence[Run], pool: KVPool, backend: Backend) -> Plan:
    """A prefill: one run of consecutive positions per session, in ascending slots, none crossing
    the ring's end (a prompt fits the window), so each run's keys are its ring's prefix.

    slot, position: [N] per row; cu_q: [n + 1] int32 row offsets of the runs; used: [n] int32,
    each run's `start + length`. Rows attend causally within their own session.
    """
    S, L, C = pool.batch, pool.layers, pool.context
    write = _starts(slot, L, C) + position[None, :]
    max_q = max(r.length for r in runs)
    rows = max(r.slot for r in runs) + 1
    if backend is Backend.MASKED:
        return Plan(backend, rows, write, C, None, None, None, None, max_q, tuple(runs))
    starts = _starts(slot[cu_q[:-1].long()], L, C)
    end = torch.full_like(starts[:, :1], S * L * C)
    return Plan(backend, rows, write, C, None, cu_q, torch.cat([starts, end], dim=1).to(torch.int32), used, max_q, ())


def write_and_attend(layer: int, q: torch.Tensor, kv: torch.Tensor, pool: KVPool, plan: Plan) -> torch.Tensor:
    """Store the rows' K and V in layer `layer` of their rings, then attend over each row's window.

    q: [N, H, D]; kv: [N, 2, H, D], both in the pool's dtype (an e4m3 pool: the compute dtype,
    quantized here). Returns [N, H, D].
    """
    if pool.scale is not None:
        return _write_and_attend_fp8(layer, q, kv, pool, plan)
    rows = plan.rows
    kv_all = pool.packed
    kv_all.index_copy_(0, plan.write[layer], kv)
    if plan.backend is Backend.FLASH:
        assert plan.cu_q is not None and plan.cu_k is not None
        return torch.ops.aten._flash_attention_forward(
            q, kv_all[:, 0], kv_all[:, 1], plan.cu_q, plan.cu_k[layer], plan.max_q, plan.span, 0.0, plan.max_q > 1,
            False, seqused_k=plan.used)[0]
    if plan.runs:
        return _masked_runs(layer, q, pool, plan)
    assert plan.mask is not None
    keys = pool.k[:rows, layer, :plan.span].transpose(1, 2)
    values = pool.v[:rows, layer, :plan.span].transpose(1, 2)
    return F.scaled_dot_product_attention(q[:, :, None], keys, values, attn_mask=plan.mask)[:, :, 0]


def _write_and_attend_fp8(layer: int, q: torch.Tensor, kv: torch.Tensor, pool: KVPool, plan: Plan) -> torch.Tensor:
    """`write_and_attend` over an e4m3 ring: the quantized write, then `kernels.kv8.attend` under
    `flash`, or under `masked` SDPA over the span's keys and values cast to q's dtype (exact), with
    K's scale folded into q and V's into the output."""
    assert pool.scale is not None and pool.inverse is not None
    scale = pool.scale[layer]
    kv8_kernels.write(pool.packed, plan.write[layer], kv, pool.inverse[layer])
    if plan.backend is Backend.FLASH:
        assert plan.cu_q is not None and plan.cu_k is not None and plan.used is not None
        return kv8_kernels.attend(q, pool.packed, scale, plan.cu_q, plan.cu_k[layer], plan.used, plan.max_q,
                                  plan.span, plan.max_q > 1)
    if plan.runs:
        return _masked_runs(layer, q, pool, plan, scale)
    assert plan.mask is not None
    keys = pool.k[:plan.rows, layer, :plan.span].to(q.dtype).transpose(1, 2)
    values = pool.v[:plan.rows, layer, :plan.span].to(q.dtype).transpose(1, 2)
    out = F.scaled_dot_product_attention((q * scale[0])[:, :, None], keys, values, attn_mask=plan.mask)
    return out[:, :, 0] * scale[1]


def _masked_runs(layer: int, q: torch.Tensor, pool: KVPool, plan: Plan,
                 scale: torch.Tensor | None = None) -> torch.Tensor:
    """Prefill runs under `masked`: each run's queries over its ring's prefix, causal, 4-D (an e4m3
    ring: its values in q's dtype, K's `scale` in q, V's on the output)."""
    outs = []
    for r in plan.runs:
        end = r.start + r.length
        keys = pool.k[r.slot, layer, :end].to(q.dtype).transpose(0, 1)[None]
        values = pool.v[r.slot, layer, :end].to(q.dtype).transpose(0, 1)[None]
        mask = torch.ones(r.length, end, dtype=torch.bool, device=q.device).tril(r.start)
        queries = q[r.first:r.first + r.length]
        queries = (queries if scale is None else queries * scale[0]).transpose(0, 1)[None]
        out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)[0].transpose(0, 1)
        outs.append(out if scale is None else out * scale[1])
    return torch.cat(outs)
