"""uvicorn's httptools protocol with every connection bounded: a header timeout and a connection cap.

uvicorn arms no timer before a first response, and any byte received cancels its keep-alive timer
for good, so a connection that never completes a request (nothing sent, or a partial request line
sent slowly) stays open forever. `HttpProtocol` gives each request `header_timeout_s`, from the
connection's opening or the previous response, to complete its headers, then aborts the connection;
and aborts at once a connection beyond `max_connections` open ones (HTTP and upgraded WebSockets
together). Both come from the front that `create_app` publishes in the lifespan state, as the live
socket's settings do; without one (another app) this is uvicorn's protocol.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from liveplex.gptlive.server import native

if TYPE_CHECKING:
    from liveplex.gptlive.server.app import Front

logger = logging.getLogger(__name__)


class HttpProtocol(HttpToolsProtocol):
    """See the module docstring; uvicorn's `http=`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._front: Front | None = None
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._front = self.app_state.get(native.FRONT)
        if self._front is None:
            return
        if len(self.connections) > self._front.settings.max_connections:
            self._cut("over_capacity")
            return
        self._arm()

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
        if self._front is not None and self._header_timer is None:
            self._header_timer = self.loop.call_later(self._front.settings.header_timeout_s,
                                                      self._cut, "header_timeout")

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cut(self, why: str) -> None:
        self._header_timer = None
        if self._front is not None:
            self._front.stats.dropped[why] += 1
        logger.debug("connection cut", extra={"reason": why, "client": self.client})
        self.transport.abort()
