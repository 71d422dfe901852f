"""The per-session temporal KV ring: slot indexing, validity masks and masked attention over it.

Each session owns one row of a preallocated pool, `[slots, heads, context, head_dim]` per layer
for K and for V. Position p lives in ring slot `p mod context` and is never moved. Keys are
stored after RoPE, so attention does not care where a position sits in the ring; it only needs to
know which slots hold positions inside the row's window (spec personaplex §3.6, §5.6): a row at
position p reads positions max(0, p - context + 1)..p, i.e. at most `context` keys, itself
included (upstream moshi 0.2.13's bounds, not the reference's off-by-one).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def slot_of(position: torch.Tensor, context: int) -> torch.Tensor:
    """Ring slot of each position (int64 in, int64 out, same shape)."""
    return torch.remainder(position, context)


def held_positions(last: torch.Tensor, context: int) -> torch.Tensor:
    """Which position each ring slot holds once positions 0..last have been written.

    `last` is [B] int64 (-1 for an empty ring); returns [B, context] int64, -1 where the slot has
    never been written. Slot s holds `last - ((last - s) mod context)`.
    """
    slots = torch.arange(context, device=last.device, dtype=torch.long)
    held = last[:, None] - torch.remainder(last[:, None] - slots, context)
    return torch.where(held >= 0, held, torch.full_like(held, -1))


def valid_slots(position: torch.Tensor, context: int) -> torch.Tensor:
    """Slots a row at `position` [B] may attend to once its own K/V is written: [B, context] bool."""
    return held_positions(position, context) >= 0


def write_and_attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    k_ring: torch.Tensor, v_ring: torch.Tensor, position: torch.Tensor,
) -> torch.Tensor:
    """One live row per session: store its K/V at its slot, then attend over its window.

    q, k, v: [B, H, D] for rows 0..B-1; k_ring, v_ring: [B, H, C, D] views of the pool rows (written
    in place); position: [B] int64. Returns [B, H, D]. The `masked` backend: it masks the invalid
    slots of every row.

    On a CUDA device it reads every slot, so shapes stay static for graph capture (the `flex`
    backend is the one that skips empty blocks there). Elsewhere it runs eagerly and reads only the
    leading `span = min(C, max(position) + 1)` slots: until a row wraps, its valid slots are
    0..position, so no row can hold anything beyond them. At batch 32 with young sessions this
    cut the attention's share of a `small` CPU tick from ~30 % to ~8 % (docs/personaplex.md).
    """
    B, H, C, D = k_ring.shape
    assert q.shape == (B, H, D), f"q is {tuple(q.shape)}, expected [B={B}, H={H}, D={D}]"
    rows = torch.arange(B, device=q.device)
    slot = slot_of(position, C)
    k_ring[rows, :, slot] = k.to(k_ring.dtype)
    v_ring[rows, :, slot] = v.to(v_ring.dtype)
    span = C if q.device.type == "cuda" else min(C, int(position.max()) + 1)
    mask = valid_slots(position, C)[:, None, None, :span]
    out = F.scaled_dot_product_attention(
        q[:, :, None].to(k_ring.dtype), k_ring[:, :, :span], v_ring[:, :, :span], attn_mask=mask)
    return out[:, :, 0]


def attend_rows(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    k_ring: torch.Tensor, v_ring: torch.Tensor, start: int,
) -> torch.Tensor:
    """Several consecutive rows of one session (a prefill): causal attention, then store them.

    q, k, v: [T, H, D] for positions start..start+T-1; k_ring, v_ring: [H, C, D], the session's ring
    before these rows (written in place afterwards). Keys are the old ring plus the new rows, so a
    chunk that crosses the ring boundary still sees exactly its window. Returns [T, H, D].
    """
    T = q.shape[0]
    C = k_ring.shape[1]
    assert T <= C, f"a prefill of {T} rows cannot exceed the ring of {C}"
    device = q.device
    old_pos = held_positions(torch.tensor([start - 1], device=device), C)[0]
    new_pos = torch.arange(start, start + T, device=device)
    key_pos = torch.cat([old_pos, new_pos])
    delta = new_pos[:, None] - key_pos[None, :]
    mask = (key_pos[None, :] >= 0) & (delta >= 0) & (delta < C)
    keys = torch.cat([k_ring, k.transpose(0, 1).to(k_ring.dtype)], dim=1)
    values = torch.cat([v_ring, v.transpose(0, 1).to(v_ring.dtype)], dim=1)
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1).to(k_ring.dtype), keys, values, attn_mask=mask[None])
    slots = slot_of(new_pos, C)
    k_ring[:, slots] = k.transpose(0, 1).to(k_ring.dtype)
    v_ring[:, slots] = v.transpose(0, 1).to(v_ring.dtype)
    return out.transpose(0, 1)


class KVPool:
    """Preallocated temporal K and V rings for `slots` sessions, one pair of tensors per layer.

    Each of `k[layer]`, `v[layer]` is [slots, heads, context, head_dim]. Allocated once at engine
    start and never resized; a session's rows change only through its own writes.
    """

    def __init__(self, layers: int, slots: int, heads: int, context: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str) -> None:
        shape = (slots, heads, context, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.context = context

    @property
    def nbytes_per_slot(self) -> int:
        return sum(t[0].numel() * t.element_size() for t in self.k + self.v)

    def clear(self, slot: int) -> None:
        """Zero one slot (reuse after a non-finite row: masked NaNs would still poison 0 x NaN)."""
        for t in self.k + self.v:
            t[slot].zero_()

    def copy_slot(self, src: int, dst: int) -> None:
        """Move a session's ring from one slot to another (compaction)."""
        for t in self.k + self.v:
            t[dst].copy_(t[src])
