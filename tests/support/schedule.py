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


def longest_first(items: Sequence[T], seconds: Mapping[str, float]) -> list[T]:
    """`items` regrouped by file, the files in decreasing expected seconds (ties: as collected),
    each file's tests in their own order."""
    by_file: dict[str, list[T]] = {}
    for item in items:
        by_file.setdefault(file_of(item.nodeid), []).append(item)

    def expected(name: str) -> float:
        return seconds.get(name, UNMEASURED_S_PER_TEST * len(by_file[name]))

    order = sorted(by_file, key=lambda name: -expected(name))  # sorted() is stable: ties as collected
    return [item for name in order for item in by_file[name]]


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
