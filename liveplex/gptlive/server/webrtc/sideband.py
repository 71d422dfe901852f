"""A WebRTC call's sideband: `/v1/live/sessions/{id}/attach`, the WebSocket an application's
server opens onto a call whose media stays between the caller and this server.

The SDK's `client.live.sideband.connect(session_id=...)`. Authenticated with the key the call
was created with; one at a time per call; an unknown, ended or other key's call is one 404.
What it gets: every server event of the call but the audio (`session.started` first, replayed on
attach; no data channel policy: the sideband is trusted), and the answer to each of its own
commands; an `error` answering one side's message goes to that side only. What it sends is read
by the call's machine like the channel's messages (mute, unmute, commentary, close; refused by
name what the machine refuses). Closing it leaves the call running; the call's end closes it
(1000, after `session.closed`). It is served by the server holding the call: the lone pod, or the
gateway whose create answered the offer; another replica relays it there (`forward`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.datastructures import Headers

from liveplex.gptlive import urls
from liveplex.gptlive.server import auth, replies
from liveplex.gptlive.server.webrtc import forward

if TYPE_CHECKING:
    from liveplex.gptlive.server.front import Front

ATTACH_PATH = urls.LIVE_PATH + "/{session_id}/attach"
NOT_FOUND = replies.openai_error(
    404, "session_not_found",
    "No live WebRTC call with this id on this server for this API key (unknown, ended, or created with another key).")
ATTACHED = replies.openai_error(409, "sideband_already_attached",
                                "This call already has a sideband attached; close that one first.")
TOO_SLOW = 1011


class Attachable(Protocol):
    """A call, as its sideband sees it (`call.Call`)."""

    key: str

    @property
    def sideband(self) -> Sideband | None: ...

    def attach(self, side: Sideband) -> None: ...

    def command(self, data: str | bytes, side: Sideband) -> None: ...

    def detach(self, side: Sideband) -> None: ...


class Sideband:
    """One attached sideband socket: sends held in order (at most `max_bytes`, else it is cut
    as a slow client), written by one task; what it reads goes to the call."""

    def __init__(self, ws: WebSocket, max_bytes: int) -> None:
        self._ws = ws
        self._max_bytes = max_bytes
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._held = 0
        self._code = 1000
        self._reason = ""
        self.closed = False

    def send(self, text: str) -> None:
        if self.closed:
            return
        self._held += len(text)
        if self._held > self._max_bytes:
            self.close(TOO_SLOW, f"sideband too slow: more than {self._max_bytes} bytes queued")
            return
        self._queue.put_nowait(text)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Close after what is held (the call ended, or the sideband is cut)."""
        if not self.closed:
            self.closed = True
            self._code, self._reason = code, reason
            self._queue.put_nowait(None)

    async def serve(self, call: Attachable) -> None:
        """Until the socket closes: its messages to the call, the call's events to it."""
        writer = asyncio.get_running_loop().create_task(self._write())
        try:
            while True:
                message = await self._ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data = message.get("text")
                call.command(data if data is not None else message.get("bytes") or b"", self)
        except WebSocketDisconnect:
            pass
        finally:
            call.detach(self)
            self.closed = True
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer

    async def _write(self) -> None:
        while True:
            text = await self._queue.get()
            if text is None:
                await self._ws.close(self._code, self._reason)
                return
            self._held -= len(text)
            await self._ws.send_text(text)


class Attach:
    """The attach route (ASGI): checks, then the sideband until it closes."""

    def __init__(self, front: Front) -> None:
        self._front = front

    async def __call__(self, scope: replies.Message, receive: replies.Receive, send: replies.Send) -> None:
        ws = WebSocket(scope, receive, send)
        if (await ws.receive())["type"] != "websocket.connect":
            return
        front = self._front
        headers = Headers([(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]])
        key = auth.upgrade_key(front.settings.api_keys, headers)
        if key is None:
            await replies.deny(scope, send, replies.UNAUTHORIZED)
            return
        session_id = scope["path_params"]["session_id"]
        call: Attachable | None = front.calls.get(session_id)
        offered = auth.subprotocols(headers.get_all("sec-websocket-protocol")) or ()
        subprotocol = auth.PAGE_SUBPROTOCOL if auth.PAGE_SUBPROTOCOL in offered else None
        if call is None and front.holders is not None and forward.FORWARDED_HEADER not in headers:
            holder = await front.holders.holder(session_id)
            if holder is not None and holder != front.holders.url:
                authorization = [] if key == auth.ANONYMOUS else [f"Bearer {key}"]
                await forward.relay(ws, send, scope, holder.rstrip("/") + scope["path"], front.holders.tls,
                                    authorization, subprotocol, NOT_FOUND)
                return
        if call is None or call.key != key:
            await replies.deny(scope, send, NOT_FOUND)
            return
        if call.sideband is not None:
            await replies.deny(scope, send, ATTACHED)
            return
        side = Sideband(ws, front.settings.outbound_max_bytes)
        call.attach(side)  # before the await: a second attach meanwhile is refused
        try:
            await ws.accept(subprotocol=subprotocol)
        except BaseException:
            call.detach(side)
            raise
        await side.serve(call)
