"""KV ring indexing (spec personaplex §3.6, §6.6 item 4)."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from liveplex.personaplex import ring


@given(position=st.integers(0, 10 ** 6), context=st.integers(1, 3000))
def test_the_valid_set_is_exactly_the_last_context_positions(position, context):
    held = ring.held_positions(torch.tensor([position]), context)[0]
    valid = held[held >= 0]
    assert sorted(valid.tolist()) == list(range(max(0, position - context + 1), position + 1))
    assert bool((ring.slot_of(valid, context) == torch.nonzero(held >= 0)[:, 0]).all())


def test_slot_of_position_is_position_mod_context_for_the_tiny_window():
    p = torch.arange(200)
    assert torch.equal(ring.slot_of(p, 40), p % 40)
    mask = ring.valid_slots(torch.tensor([0, 39, 40, 123]), 40)
    assert mask.sum(-1).tolist() == [1, 40, 40, 40]
    assert mask[0].nonzero()[:, 0].tolist() == [0]


def test_an_empty_ring_holds_nothing():
    assert bool((ring.held_positions(torch.tensor([-1]), 40) == -1).all())
