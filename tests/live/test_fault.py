"""Fault injection wraps an engine at construction; an engine built without it runs unwrapped."""

from __future__ import annotations

import pytest

from liveplex.live import fault
from liveplex.live.fault import FailingAfter, InjectedFault
from tests.live.engines import Silent
from tests.live.test_drive import make_info


def test_the_wrapped_engine_runs_its_first_ticks_then_every_tick_raises_without_running_it() -> None:
    engine = Silent(make_info())
    failing = FailingAfter(engine, 2)
    failing.tick(0)
    failing.tick(1, 0, 5)
    for _ in range(2):
        with pytest.raises(InjectedFault, match="after 2 ticks"):
            failing.tick(0)
    assert engine.skips == [0, 1] and engine.beats == [(0, None), (0, 5)]


def test_no_fault_asked_builds_the_engine_itself_and_a_fault_builds_it_wrapped() -> None:
    info = make_info()

    def make(i):
        return Silent(i)

    assert fault.failing_after(make, 0) is make
    wrapped = fault.failing_after(make, 3)(info)
    assert isinstance(wrapped, FailingAfter) and isinstance(wrapped.engine, Silent)
