"""A draw's race in one kernel (`kernels.race`): the Triton kernel, run by Triton's interpreter on
CPU tensors, against the eager composition it replaces (`sampling.winner` of the gathered noise).

Tokens are compared exactly: both score the same fp32 values and noise, the kernel with one
multiply-add (two roundings in the interpreter), the eager CPU `add` with `alpha` mostly as a fused
multiply-add, so scores may differ by an ulp, which changes the winner only where the best two
scores are within an ulp of each other: about one draw in a million with these random logits.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")

from liveplex.personaplex import sampling  # noqa: E402
from liveplex.personaplex.kernels import race  # noqa: E402  (after the skip: race.launch needs Triton)


def _noise(rows: int, cards: tuple[int, ...], seed: int) -> list[torch.Tensor]:
    """Each draw's noise, columns of one table as the served draws have them (rows sum(cards) apart)."""
    lanes = sampling.Lanes.of(cards, "cpu")
    key = sampling.key(torch.arange(seed, seed + rows))
    return lanes.split(sampling.lane_noise(key, torch.full((rows,), seed), lanes.stream, lanes.ids))


def _both(logits: torch.Tensor, noise: torch.Tensor, top_k: int, temperature: float) -> tuple[torch.Tensor, ...]:
    top = sampling.candidates(logits, top_k)
    out = torch.empty(logits.shape[0], dtype=torch.long)
    race.launch(top.values, top.indices, noise, temperature, out)
    return out, race.reference(top.values, top.indices, noise, temperature)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 4), card=st.integers(1, 3000), top_k=st.integers(1, 256),
       temperature=st.sampled_from([0.7, 0.8, 1.0, 5.0]), seed=st.integers(0, 2 ** 16))
def test_the_kernel_picks_the_eager_winner_for_any_vocabulary_and_k(rows, card, top_k, temperature, seed):
    noise = _noise(rows, (7, card), seed)[1]
    logits = 3 * torch.randn(rows, card, generator=torch.Generator().manual_seed(seed))
    fused, eager = _both(logits, noise, top_k, temperature)
    assert torch.equal(fused, eager)


def test_at_the_real_draws_every_row_takes_the_eager_token():
    noise = _noise(3, (32000,) + (2048,) * 8, seed=5)
    gen = torch.Generator().manual_seed(1)
    for s, (card, top_k, temperature) in enumerate([(32000, 25, 0.7)] + [(2048, 250, 0.8)] * 8):
        fused, eager = _both(4 * torch.randn(3, card, generator=gen), noise[s], top_k, temperature)
        assert torch.equal(fused, eager)


def test_equal_scores_go_to_the_first_candidate_as_argmax_sends_them():
    logits = torch.zeros(2, 40)
    noise = torch.zeros(2, 40)
    top = sampling.candidates(logits, 8)
    out = torch.empty(2, dtype=torch.long)
    race.launch(top.values, top.indices, noise, 0.8, out)
    assert torch.equal(out, top.indices[:, 0]) and torch.equal(out, race.reference(top.values, top.indices, noise, 0.8))


def test_the_op_is_the_eager_draw_on_the_cpu_and_shapes_only_on_meta():
    noise = _noise(2, (50,), seed=3)[0]
    logits = torch.randn(2, 50, generator=torch.Generator().manual_seed(3))
    gathered = functools.partial(torch.gather, noise, -1)
    drawn = sampling.draw(logits, greedy=False, temperature=0.8, top_k=10, race=gathered)
    assert torch.equal(race.race_draw(logits, noise, 10, 0.8), drawn)  # the CPU runs the eager ops
    top = sampling.candidates(logits, 10)
    assert torch.equal(race.race_winner(top.values, top.indices, noise, 0.8), drawn)
    meta = race.race_draw(torch.empty(3, 50, device="meta"), torch.empty(3, 50, device="meta"), 10, 0.8)
    assert meta.shape == (3,) and meta.dtype == torch.long and meta.is_meta
    torch.library.opcheck(race.race_winner, (top.values, top.indices, noise, 0.8))
