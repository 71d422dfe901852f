"""Which newcomers a tick prefills, and how much of each: a budget of prefill work per tick.

Spec §4.6, issue 14. A prefill runs before the tick's live step, so its time adds to the tick's.
The budget is time, not rows: the part of the 80 ms tick the live step leaves free (`budget_s`),
spent on newcomers in arrival order at a cost measured at startup (`PrefillCost`). A newcomer that
does not fit whole is split (chunked prefill): it takes what is left of this tick's budget and
continues at the next tick, so a burst of newcomers is spread over ticks instead of making one late.
Strict order: a later, smaller prompt never overtakes an earlier one. Pure: no tensors, no clock.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_CHUNK_ROWS = 16
"""The head of the queue always gets at least this many rows per tick (or all it has left), so
every newcomer starts after a bounded number of ticks even when the budget is nearly spent."""
START_TICKS = 25
"""Ticks (2 s) within which the longest prompt, the whole window, is prefilled once it heads the
queue, whatever the budget: the head's least chunk is a window's share (`head_rows`)."""


def head_rows(context: int) -> int:
    """The head of the queue's least chunk for a window of `context` rows: at least
    `MIN_CHUNK_ROWS`, and enough that a whole window takes at most `START_TICKS` ticks. Rows, not
    time, because what it bounds is a start's latency in ticks on any device (a 3,000-row window:
    120 rows, a few ms on a GPU, ~10-25 ms on a 2-core CPU)."""
    return max(MIN_CHUNK_ROWS, -(-context // START_TICKS))


@dataclass(frozen=True, slots=True)
class PrefillCost:
    """Seconds one prefill call takes: `per_call + per_newcomer x newcomers + per_row x rows`."""

    per_call: float
    per_newcomer: float
    per_row: float

    def of(self, rows: Sequence[int]) -> float:
        """Predicted seconds of one call prefilling chunks of `rows` rows (one per newcomer)."""
        return self.per_call + self.per_newcomer * len(rows) + self.per_row * sum(rows)

    @classmethod
    def fit(cls, rows: int, one: Sequence[float], double: Sequence[float], pair: Sequence[float]) -> PrefillCost:
        """From measured seconds of three calls (medians of repeats): one newcomer of `rows`
        rows, one of `2 rows` and two of `rows` each. Negative terms (noise) become 0, except
        the rows': where the longer call measured no slower (a loaded CPU's noise swamps the
        rows' share), one call's whole time is charged to its rows, so a noisy fit errs toward
        small chunks, never toward free rows (which would plan `max_prefill_rows` a tick)."""
        a, b, c = (statistics.median(x) for x in (one, double, pair))
        per_row = (b - a) / rows if b > a else a / rows
        per_newcomer = max(0.0, c - b)
        return cls(max(0.0, a - per_newcomer - per_row * rows), per_newcomer, per_row)


RESERVE = 0.25
"""The share of the period a measured budget leaves to host work (framing, the flush) and jitter."""
FLOOR = 0.1
"""The share of the period a tick may always spend on prefill, taken from the reserve when the live
step leaves less. Without it a pod whose tick fills the period would prefill `MIN_CHUNK_ROWS` rows
a tick whatever a row costs: the longest role prompt (~2,900 rows) would take 180 ticks, 15 s, to
start, where 8 ms a tick takes it in well under a second on a GPU and a few seconds on a slow CPU."""


def budget_s(period_s: float, tick_s: float) -> float:
    """Prefill seconds a tick may spend: the period, less the live step's measured time at the
    bucket the tick runs and the `RESERVE`; never under the `FLOOR`."""
    return max(period_s * FLOOR, period_s * (1 - RESERVE) - tick_s)


def chunks(remaining: Sequence[int], budget: float, cost: PrefillCost, max_rows: int,
           least: int = MIN_CHUNK_ROWS) -> list[int]:
    """Rows to prefill now from each queued newcomer (prompt rows left each, arrival order).

    Returns a list no longer than the queue: newcomers 0..k-2 whole, newcomer k-1 whole or split.
    The predicted cost stays within `budget` and the rows within `max_rows`, except that the
    first newcomer always gets `min(its rows, least, max_rows)` (`head_rows`), so progress never stops.
    """
    taken: list[int] = []
    for left in remaining:
        room = min(max_rows - sum(taken), _rows_affordable(taken, budget, cost))
        if not taken:
            room = max(room, min(least, max_rows))
        rows = min(left, room)
        if rows <= 0:
            break
        taken.append(rows)
        if rows < left:
            break
    return taken


def _rows_affordable(taken: list[int], budget: float, cost: PrefillCost) -> int:
    """How many rows one more newcomer may add to `taken` within `budget`."""
    spare = budget - cost.of(taken + [0])
    if spare < 0:
        return 0
    return int(spare / cost.per_row + 1e-9) if cost.per_row > 0 else 1 << 30

