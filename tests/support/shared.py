"""Slow fixture output built once per test run, not once per xdist worker.

Each pytest-xdist worker is a session of its own, so a session fixture runs on every worker that
needs it. What a fixture writes to disk and only reads afterwards (a tiny checkpoint directory)
can be built by the first worker that asks and read by the others: the workers share the parent
of their base temporary directories, and a lock file there lets one build while the others wait
(the recipe in pytest-xdist's docs, with `fcntl` for the lock).
"""

from __future__ import annotations

import fcntl
import os
import pathlib
from collections.abc import Callable

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[pathlib.Path], None]) -> pathlib.Path:
    """`<run's temp root>/name`, built by `build(path)` unless a worker already did. Readers must not
    write into it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # every worker's basetemp is a child of the same run directory
    target = root / "shared" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if `build` raises
        done = target.parent / f"{name}.built"  # beside it: `build` owns the directory's contents
        if not done.exists():
            build(target)
            done.touch()
    return target
