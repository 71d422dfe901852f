"""`OrderedWrites`: a pod's Redis writes, landing in the order their facts were read.

A heartbeat and an accept sent side by side on two pooled connections can land in either order.
When the record (read before the accept, so `active` one short) landed last, it overwrote the
accept's count until the next beat, and a gateway placing meanwhile saw the pod emptier than it
was: four sessions in a row went three and one instead of two and two. One writer task runs the
queued calls one after the other instead.

The queue is bounded: past `max_queued` (Redis down, settles outpacing their timeouts) a write is
dropped and `dropped` counts it. The next heartbeat that lands rewrites the whole record, and a
dropped accept's reservation expires with its lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

MAX_QUEUED = 1024
"""Writes waiting at most: about two seconds of settles at 500 sessions per second."""


class OrderedWrites:
    """Runs each queued call after the one before it has finished, through `run` (which turns a
    failure into None)."""

    def __init__(self, run: Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]],
                 max_queued: int = MAX_QUEUED) -> None:
        self._run = run
        self._max = max_queued
        self._queue: asyncio.Queue[tuple[Coroutine[Any, Any, Any], asyncio.Future[Any]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        """Writes refused because the queue was full."""

    def send(self, call: Coroutine[Any, Any, T]) -> asyncio.Future[T | None]:
        """Queue `call` behind every write already queued; the future has its answer (None when it
        failed or was dropped). Call on the loop."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T | None] = loop.create_future()
        if self._queue.qsize() >= self._max:
            call.close()
            self.dropped += 1
            logger.warning("redis writes backed up; dropping one", extra={"queued": self._max})
            done.set_result(None)
            return done
        if self._task is None:
            self._task = loop.create_task(self._write())
        self._queue.put_nowait((call, done))
        return done

    async def close(self) -> None:
        """Let what is queued land, in order, then stop the writer."""
        if self._task is None:
            return
        await self._queue.join()
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None

    async def _write(self) -> None:
        while True:
            call, done = await self._queue.get()
            result: Any = None
            try:
                result = await self._run(call)
            except Exception:  # a bug in one write must not stop every later one
                logger.error("redis write failed", exc_info=True)
            finally:
                self._queue.task_done()
            if not done.done():
                done.set_result(result)
