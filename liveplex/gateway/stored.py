"""The gateway's REST routes on stored and live sessions (docs/storage.md):

- `GET /v1/live/sessions/{id}/content` (`client.live.sessions.download_recording`): a stored
  session's recording as one WAV (`audio/wav`, 24 kHz, 16-bit, channel 0 the caller, channel 1
  the agent), put together from its chunks in the store (`storage.layout.assemble`), so any
  replica answers it, while the call runs (what is written so far: all but the last
  `--store-flush-s`) and after. Streamed chunk by chunk: a long call never sits in memory.
- `POST /v1/live/sessions/{id}/hangup` (`client.live.sessions.hangup`): ends a live call (a
  socket's or a WebRTC call's) as the caller's `session.close` would: `session.closed`
  `close_requested` (GPT-Live's reason for "an application close or hangup request"), then 1000.
  Answered by the replica relaying the call; another replica relays the request there (the
  session's record in Redis names it: `sessions.Held.peer`), once (`forward.FORWARDED_HEADER`).

Both are authorised as the sideband is: the API key the session was started with, and nothing
else; an unknown id, an unstored or ended one and another key's are one 404 (`session_not_found`,
`param` `session_id`), so another key learns nothing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from liveplex.gateway.gateway import Gateway
from liveplex.gateway.sessions import key_digest
from liveplex.gptlive import errors, events
from liveplex.gptlive.server import replies
from liveplex.gptlive.server.webrtc.forward import FORWARDED_HEADER
from liveplex.storage import layout
from liveplex.storage.store import ObjectStore, StoreError

logger = logging.getLogger(__name__)

CONTENT_PATH = "/v1/live/sessions/{session_id}/content"
HANGUP_PATH = "/v1/live/sessions/{session_id}/hangup"
RELAY_TIMEOUT_S = 5.0
"""A replica relaying a hangup waits this long for the one holding the call."""
_SILENCE = bytes(1 << 16)


def _store_down(why: str) -> Response:
    logger.warning("store unreachable for a download", extra={"error": why})
    return replies.response(replies.openai_error(503, "server_error", "The session store cannot be reached; retry."))


async def _pieces(store: ObjectStore, pieces: list[layout.Piece], total: int) -> AsyncIterator[bytes]:
    """The WAV: its header, then each piece (a chunk read as it is sent; silence for a gap, or for
    a chunk deleted meanwhile, so the length announced holds)."""
    yield layout.wav_header(total)
    for piece in pieces:
        data = None if piece.key is None else await store.get(piece.key)
        if data is None:
            for at in range(0, piece.size, len(_SILENCE)):
                yield _SILENCE[:min(len(_SILENCE), piece.size - at)]
        else:
            yield data[piece.skip:piece.skip + piece.size]


class StoredRoutes:
    """The two routes' handlers over one gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._front = gateway.front

    def _caller(self, request: Request, session_id: str) -> str | Response:
        """The request's API key, or the answer refusing it."""
        key = self._front.key(request.headers.getlist("authorization"))
        if key is None:
            return replies.response(replies.UNAUTHORIZED)
        return key

    async def content(self, request: Request, session_id: str) -> Response:
        """A stored session's recording (WAV), so far or whole; see the module docstring."""
        key = self._caller(request, session_id)
        if isinstance(key, Response):
            return key
        not_found = replies.response(replies.protocol_error(errors.stored_session_not_found(session_id)))
        recorder = self._gateway.recorder
        if recorder is None or not events.SESSION_ID.fullmatch(session_id):
            return not_found
        store = recorder.store
        try:
            known = await store.get(layout.meta_key(session_id))
            meta = None if known is None else layout.Meta.load(known)
            if meta is None or not meta.owned_by(key_digest(key)):
                return not_found
            pieces, total = layout.assemble(await store.list(layout.audio_prefix(session_id)))
        except StoreError as exc:
            return _store_down(str(exc))
        return StreamingResponse(_pieces(store, pieces, total), media_type=layout.MEDIA_TYPE, headers={
            "content-length": str(layout.WAV_HEADER_BYTES + total),
            "content-disposition": f'attachment; filename="{session_id}.wav"'})

    async def hangup(self, request: Request, session_id: str) -> Response:
        """End a live call of this key, here or at the replica relaying it."""
        key = self._caller(request, session_id)
        if isinstance(key, Response):
            return key
        stats = self._gateway.stats
        leg = self._gateway.backend.leg_of(session_id)
        if leg is not None and leg.owned_by(key) and leg.hang_up():
            stats.hangups["hung_up"] += 1
            return Response(status_code=204)
        not_found = replies.response(replies.protocol_error(errors.call_not_found(session_id)))
        sessions = self._gateway.sessions
        if leg is not None or FORWARDED_HEADER in request.headers or not events.SESSION_ID.fullmatch(session_id):
            stats.hangups["not_found"] += 1
            return not_found
        held = await sessions.holder(session_id)
        own = self._gateway.settings.peer_url
        if held is None or not held.belongs_to(key) or not held.peer or held.peer == own:
            stats.hangups["not_found"] += 1
            return not_found
        answer = await self._relay(held.peer, session_id, request.headers.getlist("authorization"))
        if answer is None:
            stats.hangups["not_found"] += 1
            return not_found
        stats.hangups["relayed"] += 1
        return answer

    async def _relay(self, peer: str, session_id: str, authorization: list[str]) -> Response | None:
        """The hangup at the replica `peer` (its `--peer-url`), its answer as it gave it; None: it
        cannot be reached (its calls went with it)."""
        base = "https://" + peer.removeprefix("wss://") if peer.startswith("wss://") else \
            "http://" + peer.removeprefix("ws://")
        tls = self._gateway.peer_tls
        verify = tls.context if tls is not None else True
        extensions = {"sni_hostname": tls.server_name} if tls is not None and tls.server_name else {}
        headers = [("authorization", value) for value in authorization] + [(FORWARDED_HEADER, "1")]
        try:
            async with httpx.AsyncClient(verify=verify, timeout=RELAY_TIMEOUT_S) as client:
                got = await client.post(base.rstrip("/") + HANGUP_PATH.format(session_id=session_id),
                                        headers=headers, extensions=extensions)
        except httpx.HTTPError as exc:
            logger.warning("hangup: the replica holding the call is unreachable", extra={
                "peer": peer, "session_id": session_id, "error": repr(exc)})
            return None
        return Response(got.content, status_code=got.status_code,
                        media_type=got.headers.get("content-type"))
