"""The varying tick-group rule (issue 44, `live/groups.py`): the largest G whose steps fit, held
against flapping, and where sessions go when G changes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.live import groups

PERIOD = 0.08


def linear(base_ms: float, per_row_ms: float):  # noqa: ANN201 - a step cost, (G, rows) -> seconds
    return lambda groups, rows: (base_ms + per_row_ms * rows) / 1e3


def test_the_largest_g_whose_steps_and_prefill_fit_the_period() -> None:
    step = linear(18, 2)  # 20 ms at one row: four turns of one row fill the period exactly
    assert groups.choose(step, 4, 0.0, PERIOD).groups == 4
    five = groups.choose(step, 5, 0.0, PERIOD)  # 4 x 22 ms > 80: two turns of 3 rows (24 ms)
    assert five.groups == 2 and "fits" in five.reason and "not 4 x 22.0 ms" in five.reason
    assert five.busy_s == pytest.approx(0.064)
    assert groups.choose(step, 40, 0.0, PERIOD).groups == 1  # 98 ms: nothing fits, one group
    assert "none fits" in groups.choose(step, 40, 0.0, PERIOD).reason


def test_steps_weigh_the_startup_figure_until_enough_steps_ran_then_their_recent_median() -> None:
    steps = groups.Steps({1: 0.022, 2: 0.03})
    for _ in range(groups.TRUST_STEPS - 1):
        steps.observe(1, 0.007)
    assert steps[1] == 0.022  # too few to trust
    steps.observe(1, 0.5)  # one stalled step among them: the median does not follow it
    assert steps[1] == 0.007 and steps[2] == 0.03  # a bucket never run keeps its startup figure
    for _ in range(groups.SEEN_STEPS):
        steps.observe(1, 0.012)  # the sessions aged: only the recent steps count
    assert steps[1] == 0.012 and steps.ms() == {1: 12.0, 2: 30.0}


def test_the_prefill_owed_counts_and_the_most_caps_g() -> None:
    step = linear(10, 1)
    assert groups.choose(step, 4, 0.0, PERIOD).groups == 4  # 4 x 11 = 44 ms
    assert groups.choose(step, 4, 0.020, PERIOD).groups == 2  # last turn 60 + 11 + 20 > 80; 40 + 12 + 20
    assert groups.choose(step, 4, 0.040, PERIOD).groups == 1  # 40 ms in one turn: only the whole period
    assert groups.choose(step, 4, 0.0, PERIOD, most=2).groups == 2
    assert groups.choose(step, 0, 0.0, PERIOD, most=1).groups == 1


def test_a_step_longer_than_a_turn_makes_later_turns_late_past_the_margin() -> None:
    """Four 23 ms steps end at 92 ms (> 80); three of 26 ms at turns 20 ms apart would not even be
    tried (G is 1, 2 or 4); two 36 ms steps end at 76 ms with the second turn on time."""
    assert groups.choose(lambda groups, rows: 0.023, 4, 0.0, PERIOD).groups == 2
    late = groups.choose(lambda groups, rows: 0.0300, 4, 0.0, PERIOD, margin_s=0.0)
    assert late.groups == 2 and late.late_s == 0.0
    # 45 ms steps: the second of two turns starts 5 ms late and the period ends at 90: one group
    assert groups.choose(lambda groups, rows: 0.045, 4, 0.0, PERIOD).groups == 1


@given(st.integers(0, 200), st.floats(0, 0.03), st.floats(0.1, 5), st.floats(0, 0.05))
def test_more_sessions_never_get_more_groups(sessions: int, base_s: float, per_row_ms: float,
                                              prefill_s: float) -> None:
    def step(_groups: int, rows: int) -> float:
        return base_s + per_row_ms * rows / 1e3

    chosen = groups.choose(step, sessions, prefill_s, PERIOD)
    assert groups.choose(step, sessions + 1, prefill_s, PERIOD).groups <= chosen.groups
    if chosen.groups > 1:  # what it chose fits
        assert chosen.busy_s <= PERIOD and chosen.late_s <= groups.LATE_MARGIN_S


def test_hold_takes_fewer_groups_at_once_and_more_only_after_calm_periods() -> None:
    hold = groups.Hold(4, up_periods=3)
    assert hold.update(2) == 2  # at once
    assert [hold.update(4) for _ in range(2)] == [2, 2]
    assert hold.update(2) == 2  # asked for less meanwhile: the count starts over
    assert [hold.update(4) for _ in range(3)] == [2, 2, 4]
    assert hold.update(1) == 1
    assert [hold.update(w) for w in (4, 2, 4)] == [1, 1, 2]  # the least asked for meanwhile


def test_phases_and_turns() -> None:
    assert groups.phases(2, 4) == (0, 2) and groups.phases(1, 4) == (0,) and groups.phases(4, 4) == (0, 1, 2, 3)
    assert [groups.turn(s, 2, 4) for s in range(4)] == [0, None, 1, None]
    assert [groups.turn(s, 1, 4) for s in range(4)] == [0, None, None, None]
    with pytest.raises(ValueError, match="do not divide"):
        groups.phases(3, 4)


def test_regroup_takes_the_first_turn_at_or_after_the_old_one() -> None:
    # 4 -> 2 groups (turns at sub-ticks 0 and 2): 0 -> 0, 1 -> 2, 2 -> 2, 3 wraps to 0
    assert groups.regroup([0, 1, 2, 3], 2, 4, [4, 4]) == [0, 1, 1, 0]
    assert groups.regroup([3, 1], 1, 4, [2]) == [0, 0]
    # a full group passes the session on round the period; the latest sessions are placed first
    assert groups.regroup([1, 2, 0], 2, 4, [2, 1]) == [0, 1, 0]


@given(st.integers(0, 2).map(lambda i: groups.CHOICES[i]), st.lists(st.integers(0, 3), max_size=16),
       st.integers(0, 8))
def test_regroup_places_every_session_within_the_room(g: int, at: list[int], spare: int) -> None:
    room = [(len(at) + spare) // g + (1 if i < (len(at) + spare) % g else 0) for i in range(g)]
    placed = groups.regroup(at, g, 4, room)
    assert len(placed) == len(at)
    assert all(placed.count(i) <= room[i] for i in range(g))
    turns = groups.phases(g, 4)
    if sum(room) >= len(at) * g:  # room for all anywhere: each takes the first turn at or after its own
        assert all(turns[p] == next((t for t in turns if t >= a), 0) for p, a in zip(placed, at, strict=True))
