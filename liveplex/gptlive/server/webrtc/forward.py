"""A sideband attach that reached a server not holding the call, relayed to the one that does.

Several gateway replicas answer one address, and a call's media ends at the replica whose create
answered the offer; the sideband may land on any of them. Each replica records the calls it holds
(`Holders`: the gateway's is Redis, `gateway.calls`), and one that gets an attach for a call held
elsewhere opens the same attach on the holder (its `--peer-url`) and relays both ways, so the
client sees one sideband whichever replica it reached: the holder's answers, refusals included
(401, 404, 409 with their bodies), its events, its close code. The relayed attach is marked
(`FORWARDED_HEADER`) and never relayed again: a stale record cannot make a loop. Replicas that
serve TLS reach each other at `wss://` URLs, trusting `Holders.tls` (`--peer-ca`) and checking
the name their certificate carries (`--peer-server-name`: they are dialed by IP).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.uri import parse_uri

from liveplex.gptlive.server import replies
from liveplex.gptlive.server.tls import Tls

logger = logging.getLogger(__name__)

FORWARDED_HEADER = "x-liveplex-forwarded"
CONNECT_TIMEOUT_S = 5.0
"""The holder must answer the relayed attach within this, else the call is taken as gone (404)."""


class Holders(Protocol):
    """Who holds which call, when several servers answer one address (a gateway's replicas)."""

    url: str
    """This server's own URL, as the others reach it."""
    tls: Tls | None
    """How to dial the others' `wss://` URLs; None: they are `ws://`."""

    async def hold(self, session_id: str) -> None:
        """Record this server as the call's holder (before its create is answered)."""
        ...

    async def holder(self, session_id: str) -> str | None:
        """The URL of the server holding the call; None: none recorded (unknown or ended)."""
        ...

    def forget(self, session_id: str) -> None:
        """The call ended here (recorded in the background)."""
        ...


async def relay(ws: WebSocket, send: replies.Send, scope: replies.Message, target: str, tls: Tls | None,
                authorization: list[str], subprotocol: str | None, not_found: replies.Reply) -> None:
    """Open the attach at `target` (the holder's attach URL; `wss://` dialed with `tls`) with
    the client's credentials and relay until either side closes; what the holder refuses is
    refused the same way here, and a holder that cannot be reached (its certificate not trusted
    included) is `not_found` (its calls went with it)."""
    headers = [("Authorization", value) for value in authorization] + [(FORWARDED_HEADER, "1")]
    context: ssl.SSLContext | None = None
    name: str | None = None
    if target.startswith("wss:"):
        if tls is None:  # a holder serving TLS, this replica plain (a rollout turning TLS on)
            logger.warning("sideband holder serves TLS, this replica has no peer TLS", extra={"target": target})
            await replies.deny(scope, send, not_found)
            return
        context, name = tls.context, tls.server_name or parse_uri(target).host
    try:
        upstream = await connect(target, additional_headers=headers, open_timeout=CONNECT_TIMEOUT_S,
                                 max_size=None, ping_interval=None, ssl=context,
                                 server_hostname=name)
    except InvalidStatus as refused:
        await replies.deny(scope, send, (refused.response.status_code, refused.response.body))
        return
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        logger.warning("sideband holder unreachable", extra={"target": target, "error": repr(exc)})
        await replies.deny(scope, send, not_found)
        return
    async with upstream:
        await ws.accept(subprotocol=subprotocol)
        down = asyncio.get_running_loop().create_task(_down(upstream, ws))
        try:
            await _up(ws, upstream)
        finally:
            await upstream.close()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await down


async def _up(ws: WebSocket, upstream: ClientConnection) -> None:
    """The client's messages to the holder, until the client leaves."""
    with contextlib.suppress(WebSocketDisconnect, ConnectionClosed):
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            await upstream.send(text if text is not None else message.get("bytes") or b"")


async def _down(upstream: ClientConnection, ws: WebSocket) -> None:
    """The holder's events to the client, then its close code (the call's end: 1000)."""
    try:
        async for message in upstream:
            if isinstance(message, str):
                await ws.send_text(message)
            else:
                await ws.send_bytes(message)
    except ConnectionClosed:
        pass
    with contextlib.suppress(Exception):
        await ws.close(upstream.close_code or 1011, upstream.close_reason or "")
