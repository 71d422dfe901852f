"""`Drain`: stop taking sessions, let the running ones end, end the rest at a deadline (platform §5).

A pod and the gateway drain the same way; only what "taking no more" means (`announce`: a pod
also tells its pool's Redis at once) and what counts as live (`live`) differ. A second call joins
the first; the result is how many sessions were ended at the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from liveplex.gptlive.server.app import SHUTDOWN_GRACE_S, Front

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often a drain looks at the session count (a gauge, not an event)."""


class Drain:
    def __init__(self, front: Front, live: Callable[[], int], deadline_s: float,
                 announce: Callable[[], Awaitable[None]]) -> None:
        self._front = front
        self._live = live
        self._deadline_s = deadline_s
        self._announce = announce
        self._task: asyncio.Task[int] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def __call__(self, deadline_s: float | None = None) -> asyncio.Task[int]:
        """Start draining (once); `deadline_s` None: the configured one."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(self._deadline_s if deadline_s is None else deadline_s))
        return self._task

    async def _run(self, deadline_s: float) -> int:
        await self._announce()
        logger.info("draining", extra={"sessions": self._live(), "deadline_s": deadline_s})
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(deadline_s):
                while self._live():
                    await asyncio.sleep(POLL_S)
        left = self._live()
        if left:
            await self._front.end_sessions(SHUTDOWN_GRACE_S)
        logger.info("drained", extra={"ended_at_deadline": left})
        return left
