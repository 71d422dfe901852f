"""KV ring indexing (spec personaplex §3.6, §6.6 item 4)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.bench import counts
from liveplex.personaplex import ring


def held_positions(last: torch.Tensor, context: int) -> torch.Tensor:
    """Which position each ring slot holds once positions 0..last have been written: slot s holds
    `last - ((last - s) mod context)`, -1 where never written (spec §3.6, written out)."""
    held = last[:, None] - torch.remainder(last[:, None] - torch.arange(context), context)
    return torch.where(held >= 0, held, torch.full_like(held, -1))


@given(position=st.integers(0, 10 ** 6), context=st.integers(1, 3000))
def test_the_valid_set_is_exactly_the_last_context_positions(position, context):
    held = held_positions(torch.tensor([position]), context)[0]
    valid = held[held >= 0]
    assert sorted(valid.tolist()) == list(range(max(0, position - context + 1), position + 1))
    assert bool((ring.slot_of(valid, context) == torch.nonzero(held >= 0)[:, 0]).all())
    assert torch.equal(ring.valid_slots(torch.tensor([position]), context)[0], held >= 0)  # always a prefix


def test_slot_of_position_is_position_mod_context_for_the_tiny_window():
    p = torch.arange(200)
    assert torch.equal(ring.slot_of(p, 40), p % 40)
    mask = ring.valid_slots(torch.tensor([0, 39, 40, 123]), 40)
    assert mask.sum(-1).tolist() == [1, 40, 40, 40] == ring.valid_length(torch.tensor([0, 39, 40, 123]), 40).tolist()
    assert mask[0].nonzero()[:, 0].tolist() == [0]


@settings(max_examples=25, deadline=None)
@given(positions=st.lists(st.integers(0, 130), min_size=1, max_size=4), seed=st.integers(0, 2 ** 16),
       backend=st.sampled_from(ring.Backend), tight=st.booleans())
def test_live_attention_reads_exactly_each_rows_window(positions, seed, backend, tight):
    """Young and wrapped rows in one batch, under both backends (`flash` by the counter's reference
    kernel; `masked` over the whole ring or only the leading slots any row can hold): each row equals
    plain attention over its own window; stale slots never leak in."""
    C, H, D = 40, 2, 8
    gen = torch.Generator().manual_seed(seed)
    B = len(positions)
    pool = ring.KVPool(torch.randn(B, 1, C, 2, H, D, generator=gen))
    before = pool.clone()
    q, k, v = (torch.randn(B, H, D, generator=gen) for _ in range(3))
    position = torch.tensor(positions)
    span = min(C, max(positions) + 1) if tight else C
    with counts.count():
        plan = ring.live_plan(position, pool, ring.Offsets.of(pool), backend, span)
        out = ring.write_and_attend(0, q, torch.stack([k, v], 1), pool, plan)
    for b in range(B):
        slots = torch.nonzero(ring.valid_slots(position[b:b + 1], C)[0])[:, 0]
        assert len(slots) == min(C, positions[b] + 1)
        keys, values = pool.k[b, 0][slots].double(), pool.v[b, 0][slots].double()
        weights = torch.softmax(torch.einsum("hd,shd->hs", q[b].double(), keys) / D ** 0.5, dim=-1)
        expected = torch.einsum("hs,shd->hd", weights, values)
        torch.testing.assert_close(out[b].double(), expected, rtol=0, atol=1e-5)
        written = positions[b] % C
        assert torch.equal(pool.k[b, 0, written], k[b]) and torch.equal(pool.v[b, 0, written], v[b])
        others = torch.arange(C) != written
        assert torch.equal(pool.k[b, 0, others], before.k[b, 0, others])
