"""`POST /v1/live/sessions`: a WebRTC call's create (the SDK's `client.live.create`), and its
sideband's attach (`sideband`).

Checked in the order a socket's upgrade is (the key, the server ready, the backend's own refusal),
then the body (`offer.read`), then the `Call` answers. Errors are OpenAI HTTP error bodies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.routing import WebSocketRoute
from websockets.datastructures import Headers

from liveplex.gptlive import errors, urls
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server import replies
from liveplex.gptlive.server.webrtc import offer

if TYPE_CHECKING:
    from liveplex.gptlive.server.app import Front

try:
    from liveplex.gptlive.server.webrtc import call as call_mod
    from liveplex.gptlive.server.webrtc import sideband
except ImportError:  # aiortc or PyAV missing: the `webrtc` extra is not installed
    call_mod = None

NO_WEBRTC = replies.openai_error(501, "unsupported_endpoint",
                                 "WebRTC calls need the webrtc extra on this server (pip install 'liveplex[webrtc]').")


async def _body(request: Request) -> bytes | None:
    """The request body, or None past `offer.MAX_BODY_BYTES` (read no further)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > offer.MAX_BODY_BYTES:
            return None
    return bytes(body)


def add(app: FastAPI, front: Front) -> None:
    """Add the create route to a server's client app."""

    async def create(request: Request) -> Response:
        key = front.key(request.headers.getlist("authorization"))
        if key is None:
            return replies.response(replies.UNAUTHORIZED)
        if call_mod is None:
            return replies.response(NO_WEBRTC)
        if front.sweeper is None:
            return replies.response(replies.NOT_READY)
        busy = front.backend.refusal()
        if busy is not None:
            return replies.response(busy)
        body = await _body(request)
        try:
            if body is None:
                raise errors.string_above_max_length(("body",), offer.MAX_BODY_BYTES + 1, offer.MAX_BODY_BYTES)
            read = offer.read(body)
        except ProtocolError as error:
            return replies.response(replies.protocol_error(error))
        headers = Headers([("Authorization", value) for value in request.headers.getlist("authorization")])
        return replies.response(await call_mod.Call(front, read, headers, key).answer())

    app.add_api_route(urls.LIVE_PATH, create, methods=["POST"], include_in_schema=False)
    if call_mod is not None:
        app.router.routes.append(WebSocketRoute(sideband.ATTACH_PATH, sideband.Attach(front)))
