"""Exact nearest-rank percentiles over every sample, in integer microseconds (live-contract §13.5).

The bench's and placement's latency probe's (`placement/latency.py`): below both.

liveplex keeps every sample rather than an HDR histogram: a 60 s level at 600 sessions is under
half a million frames, a few MB of int64, and exact ranks need no precision argument.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

PERCENTS = (50, 90, 99)
"""The percentiles every summary reports, besides mean and max."""


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    """Count, mean, p50, p90, p99 and max of a sample, in milliseconds."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    def as_dict(self) -> dict[str, float]:
        """The report's shape: `{"mean", "p50", "p90", "p99", "max"}` in ms plus `count`."""
        return dataclasses.asdict(self)


def nearest_rank(sorted_us: np.ndarray, percent: float) -> int:
    """The smallest sample with at least `percent` % of the samples at or below it.

    `sorted_us` is ascending and non-empty. Nearest rank: index `ceil(p/100 · n) − 1`, so p100
    is the max and p0 is clamped to the min.
    """
    n = len(sorted_us)
    if n == 0:
        raise ValueError("nearest_rank of an empty sample")
    rank = max(1, math.ceil(percent / 100 * n))
    return int(sorted_us[rank - 1])


def summarize(samples_us: Iterable[int] | np.ndarray) -> Summary:
    """Summarise integer-µs samples as ms figures; an empty sample gives all zeros."""
    values = np.sort(np.asarray(samples_us, dtype=np.int64).ravel())
    if len(values) == 0:
        return Summary(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    p50, p90, p99 = (nearest_rank(values, p) / 1000 for p in PERCENTS)
    return Summary(
        count=len(values),
        mean=float(values.mean()) / 1000,
        p50=p50,
        p90=p90,
        p99=p99,
        max=int(values[-1]) / 1000,
    )
