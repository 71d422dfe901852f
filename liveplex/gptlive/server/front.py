"""`Front`: what a GPT-Live server's routes and its live sockets share, and the key it is published under.

`app.create_app` builds the app around a `Front` and publishes it in the lifespan state under
`FRONT`; the native live protocol (`native.LiveProtocol`), the HTTP protocol and the WebRTC
sideband find it there. Its own module so that none of them imports the app.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from websockets.datastructures import Headers

from liveplex.gptlive.server import auth, backend, replies
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.gptlive.server.stats import FrontStats
from liveplex.gptlive.server.sweeper import Socket, Sweeper
from liveplex.gptlive.server.webrtc import route as webrtc_route
from liveplex.gptlive.server.webrtc.forward import Holders

FRONT = "liveplex.gptlive.front"
"""The lifespan state key under which `create_app` publishes its front end to the protocols."""


def _emptied() -> asyncio.Event:
    emptied = asyncio.Event()
    emptied.set()  # no socket yet
    return emptied


@dataclass(slots=True)
class Front:
    """What the routes and the native live sockets share; the sweeper exists while serving."""

    settings: ServerSettings
    backend: backend.Backend
    stats: FrontStats = field(default_factory=FrontStats)
    sweeper: Sweeper | None = None
    sockets: set[Socket] = field(default_factory=set)
    """The open live sockets: `join` and `leave` keep it, and `emptied` with it."""
    emptied: asyncio.Event = field(default_factory=_emptied)
    """Set while no live socket is open: what `end_sessions` awaits."""
    admin_port: int | None = None
    """The admin listener's port, once bound (`run.listeners`)."""
    calls: dict[str, Any] = field(default_factory=dict)
    """WebRTC calls by session id (`webrtc.call.Call`), for their sideband's attach."""
    holders: Holders | None = None
    """Where the other replicas' calls are (a gateway with `--peer-url`): an attach for one of
    theirs is relayed there (`webrtc.forward`); None: a lone server."""
    pending: dict[Any, None] = field(default_factory=dict)
    """Client-listener connections that have not finished a request, oldest first
    (`http_protocol.HttpProtocol`)."""

    def on_admin(self, server: tuple[str, int | None] | None) -> bool:
        """Whether a connection whose local address is `server` came in on the admin listener."""
        return server is not None and server[1] == self.admin_port

    @property
    def key_required(self) -> bool:
        """Whether a request must carry an API key (said in `/live/config`, for the demo page)."""
        return bool(self.settings.api_keys)

    def page_config(self) -> dict[str, Any]:
        """What `/live/config` says of this server itself, beside its engine's description: whether
        the demo page must ask for a key, and which transports a call may use."""
        return {"api_key_required": self.key_required, "transports": list(webrtc_route.TRANSPORTS)}

    def key(self, authorization: list[str]) -> str | None:
        """The API key an HTTP request carries (`auth.ANONYMOUS` without keys); None: refuse."""
        return auth.match_key(self.settings.api_keys, authorization)

    def refusal(self, headers: Headers, server: tuple[str, int | None] | None) -> tuple[int, bytes] | None:
        """Why an upgrade of the live path is refused (status, JSON body); None to accept."""
        if self.on_admin(server):
            return replies.NOT_FOUND
        if auth.upgrade_key(self.settings.api_keys, headers) is None:
            return replies.UNAUTHORIZED
        if self.sweeper is None:
            return replies.NOT_READY
        return self.backend.refusal(headers)

    def join(self, sock: Socket) -> None:
        """A live socket (native or WebRTC) opened."""
        self.sockets.add(sock)
        self.emptied.clear()

    def leave(self, sock: Socket) -> None:
        """A live socket closed; the last one sets `emptied`."""
        self.sockets.discard(sock)
        if not self.sockets:
            self.emptied.set()

    def guard(self, request: Request) -> Response | None:
        if self.key(request.headers.getlist("authorization")) is None:
            return replies.response(replies.UNAUTHORIZED)
        return None

    async def end_sessions(self, grace_s: float) -> None:
        """End every live socket with `server_shutdown`, then wait up to `grace_s` for them."""
        for live in list(self.sockets):
            live.shutdown()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace_s):
                await self.emptied.wait()
