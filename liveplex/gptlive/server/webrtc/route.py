"""`POST /v1/live/sessions`: a WebRTC call's create (the SDK's `client.live.create`), its
sideband's attach (`sideband`), and `GET /v1/live/ice_servers`, the STUN/TURN servers a caller
gives its `RTCPeerConnection` (a liveplex extension: an app's backend fetches it with its key and
hands it to the browser; TURN credentials minted per request, `ice`).

Checked in the order a socket's upgrade is (the key, the server ready, the backend's own refusal),
then the body (`offer.read`), then the `Call` answers. Errors are OpenAI HTTP error bodies.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import WebSocketRoute
from websockets.datastructures import Headers

from liveplex.gptlive import errors, urls
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server import api, replies
from liveplex.gptlive.server.webrtc import ice, offer, sideband

if TYPE_CHECKING:
    from liveplex.gptlive.server.front import Front
    from liveplex.gptlive.server.webrtc.call import Call

WEBRTC = all(importlib.util.find_spec(name) is not None for name in ("aiortc", "av"))
"""Whether the `webrtc` extra is installed. The call module (aiortc, PyAV) is imported by the first
offer, not at start: 0.2 s of CPU every pod and gateway start paid, most of them never calling."""

TRANSPORTS: tuple[str, ...] = ("websocket", "webrtc") if WEBRTC else ("websocket",)
"""The transports this server takes calls on, as `/live/config` lists them: the demo page offers
WebRTC only where it will be answered, not after a 501 (a core install has no `webrtc` extra)."""

ICE_SERVERS_PATH = "/v1/live/ice_servers"

NO_WEBRTC = replies.openai_error(501, "unsupported_endpoint",
                                 "WebRTC calls need the webrtc extra on this server (pip install 'liveplex[webrtc]').")


def _call_type() -> type[Call]:
    from liveplex.gptlive.server.webrtc.call import Call

    return Call


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
        """Start a WebRTC call (`client.live.create`): the session is checked as a socket's
        `session.start` is, and the answer comes once it started; with `?session_id=` (a
        re-offer), the running session continues on the new call instead (`Call`)."""
        key = front.key(request.headers.getlist("authorization"))
        if key is None:
            return replies.response(replies.UNAUTHORIZED)
        return await _answer(request, key, offer.read)

    async def fork(request: Request, session_id: str) -> Response:
        """Fork a stored session onto a new WebRTC call (`client.live.sessions.fork`): the
        request's `session` overrides the stored settings (`gptlive.fork`), the pod placed
        resumes the stored record as a new session, and the answer is the create's."""
        key = front.key(request.headers.getlist("authorization"))
        if key is None:
            return replies.response(replies.UNAUTHORIZED)
        return await _answer(request, key, offer.read_fork, fork_of=session_id)

    async def _answer(request: Request, key: str, read_offer: Callable[[bytes], offer.Offer],
                      fork_of: str | None = None) -> Response:
        """A call's answer once its caller's key was checked: the server ready, the body read."""
        if not WEBRTC:
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
            read = read_offer(body)
        except ProtocolError as error:
            return replies.response(replies.protocol_error(error))
        headers = Headers([("Authorization", value) for value in request.headers.getlist("authorization")])
        call = await asyncio.to_thread(_call_type)  # once per process, off the loop other calls run on
        return replies.response(await call(front, read, headers, key, dict(request.query_params),
                                           fork_of).answer())

    async def ice_servers(request: Request) -> Response:
        """The STUN/TURN servers a caller gives its `RTCPeerConnection`, a TURN login minted for it."""
        if front.key(request.headers.getlist("authorization")) is None:
            return replies.response(replies.UNAUTHORIZED)
        settings = front.settings
        secret = settings.webrtc_ice_secret
        credential, expires_at = None, None
        if secret is not None:
            expires_at = int(time.time()) + settings.webrtc_ice_ttl_s
            credential = ice.fresh(secret, expires_at)
        return Response(orjson.dumps({
            "ice_servers": ice.browser_servers(settings.webrtc_caller_ice_servers, credential),
            "expires_at": expires_at,
        }), media_type="application/json", headers={"Cache-Control": "no-store"})

    body = api.LiveCreateRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    app.add_api_route(urls.LIVE_PATH, create, methods=["POST"], response_model=api.LiveCreateResponse,
                      responses=api.failures(400, 401, 413, 501, 503),
                      openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                          "schema": {k: v for k, v in body.items() if k != "$defs"}}}}})
    if front.backend.forks:  # where sessions are stored (a gateway with a store)
        fork_body = api.LiveForkRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        app.add_api_route(urls.FORK_PATH, fork, methods=["POST"], response_model=api.LiveCreateResponse,
                          responses=api.failures(400, 401, 404, 413, 501, 503),
                          openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                              "schema": {k: v for k, v in fork_body.items() if k != "$defs"}}}}})
    app.add_api_route(ICE_SERVERS_PATH, ice_servers, methods=["GET"], response_model=api.IceServers,
                      responses=api.failures(401))
    if WEBRTC:
        app.router.routes.append(WebSocketRoute(sideband.ATTACH_PATH, sideband.Attach(front)))
