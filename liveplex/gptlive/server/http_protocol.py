"""uvicorn's httptools protocol with every connection bounded: a header timeout, a budget for
connections that have not finished a request, and a connection cap.

uvicorn arms no timer before a first response, and any byte received cancels its keep-alive timer
for good, so a connection that never completes a request (nothing sent, or a partial request line
sent slowly) stays open forever. `HttpProtocol` gives each request `header_timeout_s`, from the
connection's opening or the previous response, to complete its headers, then aborts the connection.

While its timer runs a connection is *pending*: it has proven nothing (no credential has been
read). Pending connections on the client listener are kept in arrival order (`Front.pending`);
past `max_pending_connections` of them, or past `max_connections` open ones (HTTP and upgraded
WebSockets together), the oldest pending one is aborted to make room. A flood of partial requests
therefore evicts itself, and a client that sends its request at once (microseconds on a healthy
network) gets through; a newcomer is refused only when every open connection is past its
request. The admin listener is not budgeted (no Service exposes it). All of it comes from the
front that `create_app` publishes in the lifespan state, as the live socket's settings do;
without one (another app) this is uvicorn's protocol.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from liveplex.gptlive.server.front import FRONT, Front

logger = logging.getLogger(__name__)


class HttpProtocol(HttpToolsProtocol):
    """See the module docstring; uvicorn's `http=`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._front: Front | None = None
        self._header_timer: asyncio.TimerHandle | None = None
        self._budgeted = False

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        front = self._front = self.app_state.get(FRONT)
        if front is None:
            return
        self._budgeted = not front.on_admin(self.server)
        self._arm()
        settings = front.settings
        if self._budgeted and (len(front.pending) > settings.max_pending_connections
                               or len(self.connections) > settings.max_connections):
            oldest = next(iter(front.pending))
            if oldest is self:  # nothing to evict: every other connection is past its request
                self._cut("over_capacity")
            else:
                oldest._cut("pending_evicted")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        waiting = bool(self.pipeline)  # a pipelined request's headers are already complete
        super().on_response_complete()
        if not waiting and not self.transport.is_closing():
            self._arm()

    def timeout_keep_alive_handler(self) -> None:
        """Abort, not close: a client that sent a request and reads nothing keeps a full buffer."""
        self.transport.abort()

    def _arm(self) -> None:
        front = self._front
        if front is not None and self._header_timer is None:
            self._header_timer = self.loop.call_later(front.settings.header_timeout_s, self._cut, "header_timeout")
            if self._budgeted:
                front.pending[self] = None

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self._front is not None:
            self._front.pending.pop(self, None)

    def _cut(self, why: str) -> None:
        self._disarm()
        if self._front is not None:
            self._front.stats.dropped[why] += 1
        logger.debug("connection cut", extra={"reason": why, "client": self.client})
        self.transport.abort()
