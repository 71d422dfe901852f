"""`Tasks`: work a component starts and does not await, held until it is done.

The event loop keeps only weak references to tasks: one nobody holds may be collected before it
finishes (asyncio's documentation says to keep a reference). Written once here; each holder keeps
its own, so it can cancel what is its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any


class Tasks:
    """The tasks one owner started, until each is done."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    def __iter__(self) -> Iterator[asyncio.Task[None]]:
        """Those not done yet (a copy: cancelling one changes the set)."""
        return iter(list(self._running))

    def __len__(self) -> int:
        return len(self._running)
