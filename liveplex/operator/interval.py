"""`PerInterval`: one computation shared by every LiveEngine's timer within an interval.

Route resolution looks at every LiveEngine in scope; when each LiveEngine's timer did it, N
LiveEngines cost N lists of N bodies per interval (N²). The first timer of an interval computes,
the timers that fire while it runs await the same result, and the rest of the interval reuses it; a
computation that failed is not kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


def due(computed_at_s: float | None, now_s: float, interval_s: float) -> bool:
    """Whether a result computed at `computed_at_s` (None: never) is too old at `now_s`."""
    return computed_at_s is None or not 0 <= now_s - computed_at_s < interval_s


class PerInterval(Generic[T]):
    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._at: float | None = None
        self._task: asyncio.Future[T] | None = None

    async def get(self, now_s: float, compute: Callable[[], Awaitable[T]]) -> T:
        task = self._task
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None
                                             or due(self._at, now_s, self.interval_s))):
            self._at = now_s
            task = self._task = asyncio.ensure_future(compute())
        return await asyncio.shield(task)
