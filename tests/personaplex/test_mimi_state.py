"""Mimi's per-row state: reset, copy and views touch only the rows they name (style rule 4)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.personaplex import mimi

ROWS = 5


def _model() -> mimi.Mimi:
    with torch.device("meta"):
        model = mimi.Mimi(mimi.tiny_config())
    return model.to_empty(device="cpu")


_MODEL = _model()


def _filled(seed: int) -> mimi.MimiState:
    """A state with every value random and non-zero, as after many frames."""
    gen = torch.Generator().manual_seed(seed)
    state = _MODEL.init_state(ROWS)
    for t in state.tensors():
        if t.dtype == torch.bool:
            t.fill_(True)
        else:
            t.copy_((torch.rand(t.shape, generator=gen) * 100 + 1).to(t.dtype))
    return state


row_sets = st.sets(st.integers(0, ROWS - 1), min_size=1, max_size=ROWS)


@settings(max_examples=25, deadline=None)
@given(rows=row_sets, seed=st.integers(0, 2**16))
def test_reset_makes_rows_fresh_and_leaves_the_others_bit_identical(rows, seed):
    state = _filled(seed)
    before = state.clone()
    fresh = _MODEL.init_state(ROWS)
    state.reset(sorted(rows))
    for now, old, new in zip(state.tensors(), before.tensors(), fresh.tensors()):
        for r in range(ROWS):
            assert torch.equal(now[r], new[r] if r in rows else old[r])


@settings(max_examples=25, deadline=None)
@given(src=st.integers(0, ROWS - 1), dst=st.integers(0, ROWS - 1), seed=st.integers(0, 2**16))
def test_copy_rows_moves_one_row_and_nothing_else(src, dst, seed):
    state = _filled(seed)
    before = state.clone()
    state.copy_rows([dst], state, [src])
    for now, old in zip(state.tensors(), before.tensors()):
        for r in range(ROWS):
            assert torch.equal(now[r], old[src] if r == dst else old[r])


def test_copy_rows_primes_one_part_from_a_template():
    state = _filled(1)
    template = _filled(2)
    before = state.clone()
    state.decoder.copy_rows([3], template.decoder, [0])
    assert torch.equal(state.decoder.convs[0][3], template.decoder.convs[0][0])
    assert torch.equal(state.encoder.ring.kv[0][3], before.encoder.ring.kv[0][3])


def test_head_is_a_view_of_the_pool():
    state = _filled(3)
    state.head(2).reset([1])
    fresh = _MODEL.init_state(ROWS)
    assert torch.equal(state.decoder.ring.kv[-1][1], fresh.decoder.ring.kv[-1][1])
    assert state.head(2).batch == 2


def test_real_codec_state_is_about_19_6_mb_per_row():
    """Spec §1.4's table: two 8.19 MB KV rings, plus the convs' windows (their ≈0.1 MB of context
    and one frame's input at each, ≈3.2 MB, written in place instead of concatenated: issue 14)."""
    with torch.device("meta"):
        real = mimi.Mimi(mimi.mimi_config())
        state = real.init_state(1)
    rings = 2 * 8 * 2 * 250 * 512 * 4
    assert rings + 3e6 <= state.nbytes <= rings + 3.4e6
    assert abs(state.nbytes / 1e6 - 19.6) < 0.1
