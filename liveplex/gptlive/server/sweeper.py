"""The one `Sweeper` timer of a server and the `Socket` it fires.

The sockets themselves are `native.LiveSocket`s. One `Sweeper` per process is the only timer: it
calls `on_timer` for the few sockets whose `Connection` has a deadline (idle guard, pending start,
close grace). Live sessions have none: usage events ride on the frame flow.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Socket(Protocol):
    """A live socket as the pod sees it (`native.LiveSocket`)."""

    def on_timer(self, now_ns: int) -> None:
        """Called by the `Sweeper` while the socket's connection has a deadline."""

    def shutdown(self) -> None:
        """The server is stopping: end the session with `server_shutdown` and close 1001."""


class Sweeper:
    """The front end's one shared timer: fires the deadlines of the sockets that have one."""

    def __init__(self, period_ms: int) -> None:
        self._period_s = period_ms / 1000
        self._sockets: set[Socket] = set()
        self._wake = asyncio.Event()

    def watch(self, sock: Socket) -> None:
        if sock not in self._sockets:
            self._sockets.add(sock)
            self._wake.set()

    def unwatch(self, sock: Socket) -> None:
        self._sockets.discard(sock)

    async def run(self) -> None:
        """Sleep while no socket has a deadline; otherwise sweep every period."""
        while True:
            if not self._sockets:
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(self._period_s)
            now = time.monotonic_ns()
            for sock in list(self._sockets):
                sock.on_timer(now)
