"""Fixtures every test directory may use, and the order files go to xdist's workers."""

import os
from typing import Any

# The fused kernels (`liveplex.personaplex.kernels`) run through Triton's interpreter on CPU tensors
# here; `triton.jit` reads this when it decorates, so before anything imports them.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

from tests.support import schedule
from tests.support.redis import redis_server, redis_url

__all__ = ["redis_server", "redis_url"]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> object | None:
    """Under `--dist loadfile`, xdist's file scheduler with `schedule.unit_of` as its scope, so the
    files of a `schedule.ONE_AFTER_ANOTHER` group go to one worker together."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:  # pytest-xdist 3's scope hook (pinned <4)
            return schedule.unit_of(nodeid)

    return ByUnit(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker (`--dist loadfile`, pyproject's addopts), the longest files first
    (tests/support/schedule.py); every worker collects the same order, as xdist requires. A run in
    one process keeps the collection order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = schedule.longest_first(items, schedule.load())
