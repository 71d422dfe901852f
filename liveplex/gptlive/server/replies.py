"""HTTP answers of a GPT-Live server in OpenAI's error shape, and the refusal of stray upgrades."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from starlette.responses import Response

from liveplex.gptlive import events
from liveplex.gptlive.errors import Code, ProtocolError

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Reply = tuple[int, bytes]
"""An HTTP status and its JSON body."""


def openai_error(status: int, code: str, message: str, param: str | None = None) -> Reply:
    """OpenAI's error shape (`api.ErrorResponse`): `param` names the request parameter at fault."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"type": kind, "code": code, "message": message, "param": param}}
    return status, orjson.dumps(body)


UNAUTHORIZED = openai_error(401, "invalid_api_key", "Missing or invalid bearer token.")
UNSUPPORTED = openai_error(404, "unsupported_endpoint",
                           "This server supports only the primary socket /v1/live/sessions.")
NOT_FOUND = openai_error(404, "not_found", "No such endpoint.")
NOT_ALLOWED = openai_error(405, "method_not_allowed", "This endpoint does not take that method.")
NOT_READY = openai_error(503, "server_error", "The engine is not running.")
INTERNAL = openai_error(500, "server_error", "The server could not check this request.")
NOT_NATIVE = openai_error(500, "server_error",
                          "The live socket needs uvicorn with ws=liveplex.gptlive.server.native.LiveProtocol.")


_STATUS = {Code.SERVER_BUSY: 503, Code.SERVER_ERROR: 500, Code.SERVER_SHUTDOWN: 503, Code.SESSION_NOT_FOUND: 404}
"""The HTTP status of a protocol error answered over HTTP (a WebRTC create or re-offer); every
other code is the caller's fault: 400. A re-offer naming no call of its key is 404, as a sideband's
attach to one is."""


def error_event(text: str) -> Reply:
    """An `error` event's text (made here or relayed from an upstream) as an HTTP error body."""
    body = orjson.loads(text)["error"]
    try:
        status = _STATUS.get(Code(body.get("code")), 400)
    except ValueError:
        status = 500
    return status, orjson.dumps({"error": body})


def protocol_error(error: ProtocolError) -> Reply:
    """A protocol error as an HTTP error body, as the same error on a socket would read."""
    return error_event(events.dump(events.Error(error, None)))


def response(reply: Reply) -> Response:
    return Response(reply[1], status_code=reply[0], media_type="application/json")


async def deny(scope: Message, send: Send, reply: Reply) -> None:
    """Refuse a WebSocket upgrade with an HTTP status and a JSON body (gpt-live §2.1)."""
    status, body = reply
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "websocket.http.response.body", "body": body})


class Refuse:
    """ASGI handler that refuses every WebSocket upgrade on its paths with an HTTP error."""

    def __init__(self, reply: Reply) -> None:
        self._reply = reply

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if (await receive())["type"] == "websocket.connect":
            await deny(scope, send, self._reply)


def models_json(models: tuple[str, ...]) -> dict[str, Any]:
    """`GET /v1/models` in OpenAI's list shape."""
    return {"object": "list", "data": [
        {"id": m, "object": "model", "created": 0, "owned_by": "liveplex"} for m in models]}
