"""The race noise of every lane in one kernel (`kernels.noise`): the Triton kernel, run by Triton's
interpreter on CPU tensors, against `sampling.lane_noise`, the eager composition it replaces.

The hash is integer arithmetic, exact in both, and so is U; only the two logs of `log(-log U)`
may round differently (each within an ulp or so): the inner one's relative difference becomes an
absolute one after the outer log, hence 1e-6 absolute plus 1e-6 relative. A wrong hash is far
outside that: the mix spreads any changed bit over about half of U's 24.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")

from liveplex.personaplex import sampling  # noqa: E402
from liveplex.personaplex.kernels import noise  # noqa: E402  (after the skip: noise.launch needs Triton)

TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}
seeds = st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1)


def _fused(key: torch.Tensor, column: torch.Tensor, lanes: sampling.Lanes) -> torch.Tensor:
    out = torch.empty(key.shape[0], lanes.ids.shape[0])
    noise.launch(key, column, lanes.stream, lanes.ids, out)
    return out


def _eager(key: torch.Tensor, column: torch.Tensor, lanes: sampling.Lanes) -> torch.Tensor:
    return sampling.lane_noise(key, column, lanes.stream, lanes.ids)


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(seeds, st.integers(0, 2 ** 40)), min_size=1, max_size=4),
       cards=st.lists(st.integers(1, 1500), min_size=1, max_size=4))
def test_the_kernel_is_the_eager_hash_for_any_rows_and_draws(rows, cards):
    key = sampling.key(torch.tensor([s for s, _ in rows]))
    column = torch.tensor([c for _, c in rows])
    lanes = sampling.Lanes.of(tuple(cards), "cpu")
    torch.testing.assert_close(_fused(key, column, lanes), _eager(key, column, lanes), **TOLERANCE)


def test_at_the_real_draws_every_lane_of_every_row_matches_and_every_draw_takes_the_same_token():
    cards = (32000,) + (2048,) * 8
    lanes = sampling.Lanes.of(cards, "cpu")
    key, column = sampling.key(torch.tensor([0, -1, 2 ** 62])), torch.tensor([1, 3000, 10 ** 6])
    fused, eager = _fused(key, column, lanes), _eager(key, column, lanes)
    torch.testing.assert_close(fused, eager, **TOLERANCE)
    noises = [lanes.split(table) for table in (fused, eager)]
    gen = torch.Generator().manual_seed(0)
    for s, (card, top_k) in enumerate([(32000, 25)] + [(2048, 250)] * 8):
        logits = torch.randn(3, card, generator=gen)
        tokens = [sampling.draw(logits, greedy=False, temperature=0.8, top_k=top_k,
                                race=functools.partial(torch.gather, n[s], -1)) for n in noises]
        assert torch.equal(*tokens)


def test_the_op_is_the_eager_hash_on_the_cpu_and_shapes_only_on_meta():
    lanes = sampling.Lanes.of((7, 5), "cpu")
    key, column = sampling.key(torch.tensor([3, -9])), torch.tensor([40, 41])
    assert torch.equal(noise.race_noise(key, column, lanes.stream, lanes.ids), _eager(key, column, lanes))
    assert torch.equal(noise.lane_noise(key, column, lanes), _eager(key, column, lanes))  # the CPU: eager ops
    meta = sampling.Lanes.of((7, 5), "meta")
    table = noise.lane_noise(key.to("meta"), column.to("meta"), meta)
    assert table.shape == (2, 12) and table.dtype == torch.float32 and table.is_meta
    torch.library.opcheck(noise.race_noise, (key, column, lanes.stream, lanes.ids))
