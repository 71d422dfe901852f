"""The drift-free clock: live-contract §14 properties 8-11."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from liveplex.live import Clock, Run, Wait, due

PERIOD = 80_000_000


def test_worked_values() -> None:
    assert due(0, 0, PERIOD) == Run(0, 0)
    assert due(1, 10, PERIOD) == Wait(PERIOD - 10)
    assert due(1, 3 * PERIOD + 5, PERIOD) == Run(3, 2)


@given(st.integers(0, 10_000), st.integers(0, 10**12))
def test_wait_is_never_zero_and_ends_at_the_slot(next_tick: int, elapsed: int) -> None:
    step = due(next_tick, elapsed, PERIOD)
    if isinstance(step, Wait):
        assert step.ns > 0
        assert elapsed + step.ns == PERIOD * next_tick
    else:
        assert step.tick == next_tick + step.skipped
        assert PERIOD * step.tick <= elapsed < PERIOD * (step.tick + 1)


@given(st.lists(st.integers(0, 5 * PERIOD), max_size=100))
def test_ticks_strictly_increase_and_never_repeat(gaps: list[int]) -> None:
    clock, elapsed, ran = Clock(PERIOD), 0, []
    for gap in gaps:
        elapsed += gap
        step = clock.poll(elapsed)
        if isinstance(step, Run):
            ran.append(step.tick)
    assert ran == sorted(set(ran))


@given(st.integers(PERIOD, 10**11), st.integers(1, 100))
def test_resume_runs_at_once_without_skips_then_on_time(idle: int, later: int) -> None:
    # idle starts after tick 0's slot: resuming inside the slot of a tick that already ran
    # waits for the next slot instead (a tick never runs twice).
    clock = Clock(PERIOD)
    assert clock.poll(0) == Run(0, 0)
    clock.resume(idle)
    step = clock.poll(idle)
    assert isinstance(step, Run) and step.skipped == 0
    nxt = clock.poll(idle)
    assert isinstance(nxt, Wait) and idle + nxt.ns == PERIOD * (step.tick + 1)
    assert clock.poll(PERIOD * (step.tick + later)) == Run(step.tick + later, later - 1)
