"""`Sessions`: how many sockets the running checks may hold at once, the server's capacity.

Checks run several at a time, and several of them open up to eight sockets at once, so against a
small server they met `server_busy` where they expected a session (23 failures against a 4-slot
pod). Every socket a check opens takes one slot first, and gives it back `RELEASE_S` after it
closed, the time the server takes to free the session's own slot (gpt-live §10: at its next tick).
Checks that run alone take every slot, so that nothing else holds one; they open their sockets
without asking. A check's time limit (`Deadline`) stops while it waits for a slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

RELEASE_S = 0.25
"""A closed socket's slot comes back after this: the server frees it within a tick (80 ms)."""

GiveBack = Callable[[], None]
"""Gives taken slots back; calling it again does nothing."""


class Deadline:
    """A check's time limit, stopped while any of its sockets waits for a slot."""

    def __init__(self, timeout: asyncio.Timeout) -> None:
        self._timeout = timeout
        self._waiting = 0
        self._left: float | None = None

    def remaining(self) -> float | None:
        """Seconds left (None while stopped or unlimited)."""
        when = self._timeout.when()
        return None if when is None else when - asyncio.get_running_loop().time()

    def stop(self) -> None:
        if self._waiting == 0:
            self._left = self.remaining()
            self._timeout.reschedule(None)
        self._waiting += 1

    def start(self) -> None:
        self._waiting -= 1
        if self._waiting == 0 and self._left is not None:
            self._timeout.reschedule(asyncio.get_running_loop().time() + self._left)
            self._left = None


class Sessions:
    """`limit` slots (None: as many as asked for, when the capacity is unknown)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._free = asyncio.Semaphore(limit) if limit else None

    async def take(self, n: int = 1, deadline: Deadline | None = None) -> GiveBack:
        """Wait for `n` slots (at most `limit`), with `deadline` stopped meanwhile; returns the
        function that gives them back, once.

        Only checks that run alone ask for more than one, so two callers never wait on each other's
        half-taken slots."""
        free = self._free
        if free is None or self.limit is None:
            return nothing
        n = min(n, self.limit)
        taken = 0
        if deadline is not None:
            deadline.stop()
        try:
            for _ in range(n):
                await free.acquire()
                taken += 1
        except BaseException:
            for _ in range(taken):
                free.release()
            raise
        finally:
            if deadline is not None:
                deadline.start()
        given = False

        def give_back() -> None:
            nonlocal given
            if not given:
                given = True
                asyncio.get_running_loop().call_later(RELEASE_S, _release, free, n)

        return give_back


def _release(free: asyncio.Semaphore, n: int) -> None:
    for _ in range(n):
        free.release()


def nothing() -> None:
    """The `GiveBack` of a check that took no slot."""
