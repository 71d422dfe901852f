"""Counter-based draws (Decision D8, spec personaplex §5.9, §6.6 item 8)."""

from __future__ import annotations

import functools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.personaplex import sampling, step

seeds = st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1)
columns = st.integers(min_value=0, max_value=10 ** 7)


def _whole(key: torch.Tensor, column: torch.Tensor, cards: tuple[int, ...]) -> list[sampling.Race]:
    """The races gathered from the noise of every lane, as off the CPU."""
    lanes = sampling.Lanes.of(cards, "cpu")
    noise = lanes.split(sampling.lane_noise(key, column, lanes.stream, lanes.ids))
    return [functools.partial(torch.gather, n, -1) for n in noise]


def _race(seeds: list[int], columns: list[int], stream: int, card: int) -> sampling.Race:
    cards = (1,) * stream + (card,)
    return _whole(sampling.key(torch.tensor(seeds)), torch.tensor(columns), cards)[stream]


def test_a_ticks_races_whole_or_by_candidates_are_each_draws_own_noise():
    key, column = sampling.key(torch.tensor([3, -9])), torch.tensor([40, 41])
    assert key.tolist() == [sampling.key(3), sampling.key(-9)]  # the host's key is the device's
    cards = (7, 5, 5, 9)
    whole = _whole(key, column, cards)
    by_candidates = sampling.races(key, column, cards)
    for s, card in enumerate(cards):
        ids = torch.tensor([[card - 1, 0, 2], [1, 1, card - 2]])
        alone = torch.log(-torch.log(sampling.uniforms(key, column, range(s, s + 1), card)[:, 0])).gather(-1, ids)
        assert torch.equal(whole[s](ids), alone) and torch.equal(by_candidates[s](ids), alone)


def test_a_ticks_draws_over_every_lane_as_off_the_cpu_are_its_draws_by_candidates():
    key, column = sampling.key(torch.tensor([1, -2, 3])), torch.tensor([5, 6, 7])
    cards = step.draw_cards(300, 64)
    sample = sampling.Sampling(text_top_k=25, audio_top_k=20)
    by_lanes = step.sampled_draws(sample, key, column, 300, 64, sampling.Lanes.of(cards, "cpu"))
    by_candidates = step.sampled_draws(sample, key, column, 300, 64)
    gen = torch.Generator().manual_seed(4)
    for stream, card in enumerate(cards):
        logits = 3 * torch.randn(3, card, generator=gen)
        assert torch.equal(by_lanes(logits, stream), by_candidates(logits, stream))


def test_pinned_noise_values():
    """Pinned so that a change of the hash (or a CPU/GPU difference) is caught."""
    u = sampling.uniforms(sampling.key(torch.tensor([0, 42, -1])), torch.tensor([1, 88, 3000]), range(0, 1), 4)[:, 0]
    bits = (u * 2 ** 24 - 0.5).long().tolist()
    assert bits == [[7166677, 5733293, 3613689, 7993780], [13085746, 2749313, 3621176, 2714914],
                    [9494836, 15529386, 10964654, 7613151]]
    u = sampling.uniforms(sampling.key(torch.tensor([7])), torch.tensor([5]), range(7, 9), 2)[:, 1]
    assert (u * 2 ** 24 - 0.5).long().tolist() == [[13885296, 12974050]]


@given(seed=seeds, column=columns, stream=st.integers(0, 8))
def test_noise_is_strictly_inside_the_unit_interval(seed, column, stream):
    u = sampling.uniforms(sampling.key(torch.tensor([seed])), torch.tensor([column]), range(stream, stream + 1), 64)
    assert bool((u > 0).all()) and bool((u < 1).all())


@settings(max_examples=50, deadline=None)
@given(seed=seeds, column=columns, others=st.lists(st.tuples(seeds, columns), max_size=6),
       where=st.integers(0, 6), data=st.randoms(use_true_random=False))
def test_a_rows_draw_does_not_depend_on_its_batch_neighbours(seed, column, others, where, data):
    gen = torch.Generator().manual_seed(data.randint(0, 2 ** 31))
    logits = torch.randn(1, 300, generator=gen)
    kwargs = {"greedy": False, "temperature": 0.8, "top_k": 25}
    alone = sampling.draw(logits, race=_race([seed], [column], 1, 300), **kwargs)
    where = min(where, len(others))
    rows = others[:where] + [(seed, column)] + others[where:]
    batch_logits = torch.randn(len(rows), 300, generator=gen)
    batch_logits[where] = logits[0]
    batch = sampling.draw(batch_logits, race=_race([s for s, _ in rows], [c for _, c in rows], 1, 300), **kwargs)
    assert int(batch[where]) == int(alone[0])


@settings(max_examples=50, deadline=None)
@given(seed=seeds, column=columns, top_k=st.integers(1, 40), stream=st.integers(0, 8))
def test_draws_never_leave_the_top_k(seed, column, top_k, stream):
    gen = torch.Generator().manual_seed(abs(seed) % 2 ** 31)
    logits = torch.randn(3, 100, generator=gen) * 3
    got = sampling.draw(logits, greedy=False, temperature=1.0, top_k=top_k,
                        race=_race([seed] * 3, [column] * 3, stream, 100))
    top = torch.topk(logits, top_k, dim=-1).indices
    assert all(int(got[r]) in top[r].tolist() for r in range(3))


def test_frequencies_match_the_softmax():
    """Chi-square over 8000 fixed seeds on a 5-token vocabulary; df = 4, critical value at
    alpha = 0.001 is 18.47. Fixed seeds make it deterministic."""
    logits = torch.tensor([1.0, 0.0, -0.5, 2.0, 0.3])
    temperature = 0.8
    n = 8000
    got = sampling.draw(logits.expand(n, -1), greedy=False, temperature=temperature, top_k=5,
                        race=sampling.races(sampling.key(torch.arange(n)), torch.full((n,), 9), (5,))[0])
    counts = torch.bincount(got, minlength=5).double()
    expected = torch.softmax(logits.double() / temperature, -1) * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 18.47, (counts.tolist(), expected.tolist())


def test_greedy_takes_the_argmax_and_ties_go_to_the_lowest_id():
    logits = torch.tensor([[0.0, 2.0, 2.0, 1.0], [5.0, 5.0, 0.0, 0.0]])
    got = sampling.draw(logits, greedy=True, temperature=1.0, top_k=2, race=None)
    assert got.tolist() == [1, 0]
