"""Fixtures every test directory may use, and the order files go to xdist's workers."""

import os

# The fused kernels (`liveplex.personaplex.kernels`) run through Triton's interpreter on CPU tensors
# here; `triton.jit` reads this when it decorates, so before anything imports them.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

from tests.support import schedule
from tests.support.redis import redis_server, redis_url

__all__ = ["redis_server", "redis_url"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker (`--dist loadfile`, pyproject's addopts), the longest files first
    (tests/support/schedule.py); every worker collects the same order, as xdist requires. A run in
    one process keeps the collection order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = schedule.longest_first(items, schedule.load())
