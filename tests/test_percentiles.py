"""Exact nearest-rank percentiles (live-contract §13.5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex import percentiles


def test_hundred_samples_rank_exactly() -> None:
    summary = percentiles.summarize([1000 * v for v in range(1, 101)])
    assert (summary.p50, summary.p90, summary.p99, summary.max) == (50.0, 90.0, 99.0, 100.0)
    assert summary.mean == pytest.approx(50.5)
    assert summary.count == 100


def test_order_of_samples_does_not_matter() -> None:
    ordered = percentiles.summarize([3000, 1000, 2000, 5000, 4000])
    assert ordered == percentiles.summarize([5000, 4000, 3000, 2000, 1000])
    assert ordered.p50 == 3.0 and ordered.p99 == 5.0


def test_one_sample_is_every_percentile() -> None:
    summary = percentiles.summarize([7500])
    assert summary.p50 == summary.p90 == summary.p99 == summary.max == 7.5


def test_an_empty_sample_summarises_to_zeros() -> None:
    assert percentiles.summarize([]) == percentiles.Summary(0, 0.0, 0.0, 0.0, 0.0, 0.0)


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=300), st.floats(0.1, 100))
def test_nearest_rank_is_the_smallest_value_covering_the_percent(
    values: list[int], percent: float
) -> None:
    ranked = np.sort(np.array(values, np.int64))
    got = percentiles.nearest_rank(ranked, percent)
    assert got in values
    at_or_below = sum(v <= got for v in values)
    assert at_or_below >= math.ceil(percent / 100 * len(values))
    assert sum(v < got for v in values) < math.ceil(percent / 100 * len(values))
