"""The pod's side of a handover (docs/continuity.md): export a live session, hold imported blobs.

Two HTTP routes on the client port (`hop.EXPORT_PATH`, `hop.IMPORT_PATH`), behind the pod token
like the live socket. The export asks the engine to take the session the gateway opened under
that id out at the next tick boundary and answers its blob; the session's socket then closes
with `hop.HANDED_OVER_CLOSE`, after its last frame. The import checks a blob against what the
pod serves and holds it for `IMPORT_TTL_S` under an id the gateway names in the
`hop.IMPORT_HEADER` header of the upstream socket that continues the session. The per-frame
path (socket, `Connection`, channel) is untouched: only a session's start and end differ.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

import orjson
from starlette.requests import Request
from starlette.responses import Response

from liveplex.continuity import blob
from liveplex.continuity.errors import HandoverError
from liveplex.gptlive.server import hop, replies
from liveplex.live import channel

IMPORT_TTL_S = 10.0
"""How long a held import waits for its socket."""
MAX_BLOB_BYTES = 256 << 20
"""Largest blob the import route reads (a full PersonaPlex session is about 20 MB)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A checked blob waiting for its socket."""

    data: bytes
    header: blob.Header
    expires: float


class Imports:
    """Blobs checked by the import route, held until their socket takes them; at most `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: OrderedDict[str, Held] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def put(self, data: bytes, header: blob.Header, now: float) -> str | None:
        """Hold `data`; its id, or None when `limit` blobs are held already."""
        self._expire(now)
        if len(self._held) >= self.limit:
            return None
        key = "imp_" + secrets.token_hex(12)
        self._held[key] = Held(data, header, now + IMPORT_TTL_S)
        return key

    def take(self, key: str, now: float) -> Held | None:
        """The held import `key`, once (None: unknown or expired)."""
        self._expire(now)
        return self._held.pop(key, None)

    def _expire(self, now: float) -> None:
        while self._held and next(iter(self._held.values())).expires <= now:
            self._held.popitem(last=False)


def refused(err: HandoverError) -> Response:
    return replies.response(replies.openai_error(400, err.code.value, err.message, err.param))


@dataclass(frozen=True, slots=True)
class Exported:
    """An engine's blob of a session, and how many of its socket's messages the blob holds."""

    data: bytes
    read: int


def exported(got: Exported) -> Response:
    """The export's answer: the blob, the frames it ran and the messages it read, in headers."""
    header = blob.decode(got.data)
    assert isinstance(header, blob.Handover), "an engine's own blob decodes"
    return Response(got.data, media_type="application/octet-stream",
                    headers={hop.FRAMES_HEADER: str(header.header.frames), hop.READ_HEADER: str(got.read)})


def imported(key: str, header: blob.Header) -> Response:
    return Response(orjson.dumps({"import_id": key, "frames": header.frames, "voice": header.voice}),
                    status_code=201, media_type="application/json")


NOT_FOUND = replies.openai_error(404, "session_not_found", "No live session with that id on this pod.")
NOT_RUNNING = replies.openai_error(409, "session_not_running",
                                   "The session is not running here (not started yet, or ended); it stays.")
FULL = replies.openai_error(503, "server_busy", "This pod holds as many imports as it has session slots.")


async def read_body(request: Request) -> bytes | None:
    """The request's body, or None once it passes `MAX_BLOB_BYTES` (read no further)."""
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BLOB_BYTES:
            return None
        parts.append(chunk)
    return b"".join(parts)


def now() -> float:
    return time.monotonic()


async def wait(future: concurrent.futures.Future[channel.State | None]) -> bytes | None:
    """An engine's export future, awaited on the loop, as the blob a move carries."""
    state = await asyncio.wrap_future(future)
    return None if state is None else channel.blob_of(state)
