"""Which newcomers a tick prefills: an arrival-order prefix within a row budget (spec §4.6)."""

from __future__ import annotations

from collections.abc import Sequence


def prefix_within(rows: Sequence[int], budget: int) -> int:
    """How many of the queued newcomers (prompt rows each, in arrival order) to prefill now.

    Newcomers are taken while the next one still fits `budget` rows; the first is always taken,
    even alone over budget, so every newcomer is prefilled within len(queue) ticks. Strict order:
    a later, smaller prompt never overtakes an earlier one.
    """
    taken, used = 0, 0
    for r in rows:
        if taken and used + r > budget:
            break
        taken += 1
        used += r
    return taken
