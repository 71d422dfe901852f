"""Batch buckets: a tick over B sessions runs the smallest bucket >= B (spec personaplex §5.7).

Padding rows B..bucket-1 belong to free slots, so a bucket never touches a live session's state.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


def cut(buckets: Sequence[int], max_sessions: int) -> tuple[int, ...]:
    """The buckets below `max_sessions`, plus `max_sessions` itself, sorted and unique."""
    return tuple(sorted({b for b in buckets if 0 < b < max_sessions} | {max_sessions}))


def bucket_for(sessions: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds `sessions` (`buckets` sorted, as `cut` returns them)."""
    i = bisect.bisect_left(buckets, sessions)
    if i == len(buckets):
        raise ValueError(f"{sessions} sessions exceed the largest bucket {buckets[-1]}")
    return buckets[i]
