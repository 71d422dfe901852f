"""The order and the units the suite's files go to xdist's workers in (tests/support/schedule.py)."""

from __future__ import annotations

import dataclasses

from tests.support import schedule


@dataclasses.dataclass
class Item:
    nodeid: str


def test_the_clock_benches_are_one_unit_and_every_other_file_its_own() -> None:
    assert {schedule.unit_of(f"{file}::t") for file in schedule.ONE_AFTER_ANOTHER} == {"tests/bench: clock"}
    assert schedule.unit_of("tests/live/test_jitter.py::test_x[1]") == "tests/live/test_jitter.py"


def test_units_go_longest_first_with_a_groups_files_together() -> None:
    ramp, latency = "tests/bench/test_ci_ramp.py", "tests/bench/test_latency.py"
    items = [Item(f"{ramp}::a"), Item("tests/x.py::b"), Item(f"{latency}::c"), Item("tests/y.py::d"),
             Item(f"{ramp}::e")]
    seconds = {ramp: 10.0, latency: 10.0, "tests/x.py": 15.0, "tests/y.py": 1.0}
    ordered = [item.nodeid for item in schedule.longest_first(items, seconds)]
    # the group's 20 s go before x's 15 s; its files stay whole and in their own order
    assert ordered == [f"{ramp}::a", f"{ramp}::e", f"{latency}::c", "tests/x.py::b", "tests/y.py::d"]
