"""`PerInterval`: the first caller of an interval computes, callers meanwhile share it, failures are not kept."""

from __future__ import annotations

import asyncio

import pytest

from liveplex.operator.interval import PerInterval, due


def test_due_when_never_computed_too_old_or_the_clock_went_back() -> None:
    assert due(None, 5.0, 10.0)
    assert not due(0.0, 9.9, 10.0)
    assert due(0.0, 10.0, 10.0)
    assert due(5.0, 4.0, 10.0)


async def test_one_computation_per_interval_shared_by_concurrent_callers() -> None:
    runs = 0

    async def compute() -> int:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0.01)
        return runs

    shared: PerInterval[int] = PerInterval(10.0)
    assert await asyncio.gather(*(shared.get(0.0, compute) for _ in range(50))) == [1] * 50
    assert await shared.get(9.0, compute) == 1 and runs == 1
    assert await shared.get(10.0, compute) == 2


async def test_a_failed_computation_is_not_kept() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("API server down")
        return "ok"

    shared: PerInterval[str] = PerInterval(10.0)
    with pytest.raises(ConnectionError):
        await shared.get(0.0, flaky)
    assert await shared.get(1.0, flaky) == "ok"
