"""The order test files go to pytest-xdist's workers: longest first (docs/testing.md).

The suite runs with `--dist loadfile`: a file's tests stay on one worker, so a module's fixtures
(a platform, a tiny model, reference runs) are built once, not once per worker that drew some of
its tests. xdist hands out files in collection order; with the longest first, the last file any
worker starts is a short one and the two workers finish together, instead of one of them running
the 170 s served checklist alone at the end. The seconds per file are measured
(`tests/file_seconds.json`, written by `python -m tests.support.schedule JUNIT_XML` from a run
with `--junitxml`); only their order matters, so they need refreshing when a file's cost changes
a lot, not on every change.
"""

from __future__ import annotations

import collections
import json
import pathlib
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

SECONDS = pathlib.Path(__file__).parent.parent / "file_seconds.json"
# A file not measured yet: this much per test (a quick unit test is ~0.05 s, a served one ~5 s).
UNMEASURED_S_PER_TEST = 0.5


class Item(Protocol):
    nodeid: str


T = TypeVar("T", bound=Item)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


ONE_AFTER_ANOTHER: Mapping[str, str] = dict.fromkeys(
    ("tests/bench/test_ci_ramp.py", "tests/bench/test_latency.py", "tests/bench/test_pod.py",
     "tests/bench/test_baseline.py"), "tests/bench: clock")
"""Files that run on one worker in turn, never two at once: the benches that judge a pod by the
clock (clean levels, the adaptive buffer's lead over the fixed one). Each passes beside the other
worker's CPU work; two of them side by side starved each other's callers (a clean-clone run:
8 sessions CLIENT-LIMITED, the adaptive pod 188 ms above the ideal)."""


def unit_of(nodeid: str) -> str:
    """What xdist hands a worker whole: the test's file, or its `ONE_AFTER_ANOTHER` group."""
    file = file_of(nodeid)
    return ONE_AFTER_ANOTHER.get(file, file)


def longest_first(items: Sequence[T], seconds: Mapping[str, float]) -> list[T]:
    """`items` regrouped by unit (`unit_of`), the units in decreasing expected seconds (ties: as
    collected), each unit's files and tests in their own order."""
    by_unit: dict[str, dict[str, list[T]]] = {}
    for item in items:
        file = file_of(item.nodeid)
        by_unit.setdefault(unit_of(item.nodeid), {}).setdefault(file, []).append(item)

    def expected(unit: str) -> float:
        return sum(seconds.get(file, UNMEASURED_S_PER_TEST * len(tests)) for file, tests in by_unit[unit].items())

    order = sorted(by_unit, key=lambda unit: -expected(unit))  # sorted() is stable: ties as collected
    return [item for unit in order for tests in by_unit[unit].values() for item in tests]


def load() -> dict[str, float]:
    return json.loads(SECONDS.read_text()) if SECONDS.exists() else {}


def measured(junit_xml: pathlib.Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown: junit's `time`) from a pytest junit report."""
    totals: collections.Counter[str] = collections.Counter()
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "")
        parts = module.split(".")
        # classname is the module path, plus the class for tests in a class: keep the module.
        while parts and not (pathlib.Path(*parts).with_suffix(".py")).exists():
            parts.pop()
        if parts:
            totals["/".join(parts) + ".py"] += float(case.get("time", 0))
    return {name: round(s, 1) for name, s in sorted(totals.items())}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.support.schedule JUNIT_XML  (from the repository root)")
    SECONDS.write_text(json.dumps(measured(pathlib.Path(sys.argv[1])), indent=0) + "\n")
    print(f"wrote {SECONDS}")
