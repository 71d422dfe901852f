"""`liveplex bench baseline`: the physical limit of a Python WebSocket pod on this machine.

A bare `websockets` server (uvloop, no FastAPI, no tick loop, no jitter buffer) serving the
GPT-Live subset the bench uses: `session.start` → `session.started`, every 80 ms of appended
audio → one `session.output_audio.delta` echoing it at once, `session.close` → `session.closed`
and close 1000. Two variants (performance.md §3.2):

- `raw`, the transport limit: appends are recognised by prefix and their base64 text is sliced
  and echoed, with no JSON or base64 work. It relies on the client's message layout
  (`{"type":"session.input_audio.append","audio":"…"}`, as the bench sends it) and on chunks of a
  multiple of 3 bytes, so concatenated base64 stays valid (20 and 80 ms chunks are);
- `json`, the protocol-cost limit: every append is parsed with orjson, base64-decoded, buffered,
  and each frame re-encoded and serialised, as a real front end must.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import sys
from collections.abc import Awaitable, Callable

import orjson
from websockets import exceptions as ws_exceptions
from websockets import http11
from websockets.asyncio import server as ws_server

from liveplex import listen
from liveplex.bench import loop
from liveplex.gptlive import events
from liveplex.live import frames

logger = logging.getLogger(__name__)

VARIANTS = ("json", "raw")
"""`json`: parse and re-encode every frame; `raw`: slice text only."""

MODEL = "liveplex-baseline"
"""The id `GET /v1/models` lists; `session.start` accepts any model."""

_APPEND_PREFIX = '{"type":"session.input_audio.append","audio":"'
_DELTA_PREFIX = '{"type":"session.output_audio.delta","delta":"'

Handler = Callable[[ws_server.ServerConnection], Awaitable[None]]


def _started(start: dict[str, object]) -> tuple[str, int]:
    """The canned `session.started` reply to `start`, and the session's frame size in bytes."""
    session = start.get("session") or {}
    assert isinstance(session, dict)
    audio_format = (session.get("audio") or {}).get("format") or {"type": "audio/pcm", "rate": 24000}
    rate = int(audio_format["rate"])
    frame_bytes = rate * frames.FRAME_MS // 1000 * (2 if audio_format["type"] == "audio/pcm" else 1)
    resource = {
        "id": "sess_baseline",
        "status": "active",
        "expires_at": 0,
        "model": session.get("model", MODEL),
        "instructions": "",
        "audio": {"format": audio_format, "output": {"voice": "marin"}},
        "store": False,
    }
    reply = {"type": "session.started", "event_id": "event_baseline", "session": resource}
    return orjson.dumps(reply).decode(), frame_bytes


def _closed() -> str:
    """The canned `session.closed` reply."""
    return orjson.dumps(
        {"type": "session.closed", "event_id": "event_baseline_closed", "reason": "close_requested",
         "usage": {"seconds": 0}}
    ).decode()


async def _raw(ws: ws_server.ServerConnection) -> None:
    """Echo appends by slicing their base64 text into 80 ms deltas."""
    frame_b64 = 0
    pending = ""
    prefix_len = len(_APPEND_PREFIX)
    async for message in ws:
        assert isinstance(message, str)
        if message.startswith(_APPEND_PREFIX):
            pending += message[prefix_len:-2]
            while frame_b64 and len(pending) >= frame_b64:
                await ws.send(_DELTA_PREFIX + pending[:frame_b64] + '"}')
                pending = pending[frame_b64:]
        elif '"session.start"' in message:
            reply, frame_bytes = _started(orjson.loads(message))
            frame_b64 = frame_bytes * 4 // 3
            await ws.send(reply)
        elif '"session.close"' in message:
            await ws.send(_closed())
            return


async def _json(ws: ws_server.ServerConnection) -> None:
    """Echo appends through orjson and base64, one re-encoded delta per 80 ms of audio."""
    frame_bytes = 0
    pending = bytearray()
    async for message in ws:
        event = orjson.loads(message)
        kind = event["type"]
        if kind == "session.input_audio.append":
            pending += base64.b64decode(event["audio"])
            while frame_bytes and len(pending) >= frame_bytes:
                delta = base64.b64encode(pending[:frame_bytes]).decode()
                del pending[:frame_bytes]
                out = {"type": "session.output_audio.delta", "delta": delta}
                await ws.send(orjson.dumps(out), text=True)
        elif kind == "session.start":
            reply, frame_bytes = _started(event)
            await ws.send(reply)
        elif kind == "session.close":
            await ws.send(_closed())
            return


def _handler(variant: str) -> Handler:
    """The per-connection handler of `variant`; a client vanishing mid-session is normal."""
    echo = _raw if variant == "raw" else _json

    async def handle(ws: ws_server.ServerConnection) -> None:
        try:
            await echo(ws)
        except ws_exceptions.ConnectionClosed:
            pass

    return handle


def _route(
    connection: ws_server.ServerConnection, request: http11.Request
) -> http11.Response | None:
    """Upgrade only `/v1/live/sessions`; answer `GET /v1/models` so the bench can find a model."""
    path = request.path.split("?", 1)[0]
    if path == "/v1/models":
        body = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0,
                                            "owned_by": "liveplex"}]}
        return connection.respond(200, orjson.dumps(body).decode())
    if path != "/v1/live/sessions":
        return connection.respond(404, "not found\n")
    return None


async def serve(variant: str, host: str, port: int, ready: asyncio.Future[int] | None = None) -> None:
    """Serve until cancelled. `ready`, if given, receives the bound port (useful with port 0)."""
    async with ws_server.serve(
        _handler(variant),
        host,
        port,
        process_request=_route,
        compression=None,
        max_size=events.MAX_MESSAGE_BYTES,
        ping_interval=None,
    ) as server:
        bound = next(iter(server.sockets)).getsockname()[1]
        logger.info("baseline listening", extra={"variant": variant, "port": bound})
        if ready is not None:
            ready.set_result(bound)
        await asyncio.Future()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex bench baseline", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--variant", choices=VARIANTS, default="json",
                        help="json: parse and re-encode each frame; raw: slice text (default: %(default)s)")
    listen.add_arguments(parser, "the baseline", port=8100)
    return parser


def main(argv: list[str]) -> int:
    """`liveplex bench baseline [--variant json|raw] [--host H] [--port P]`."""
    args = build_parser().parse_args(argv)
    try:
        listen.check(args.host, args.port)
    except ValueError as exc:
        print(f"liveplex bench baseline: {exc}", file=sys.stderr)
        return 2
    print(f"liveplex bench baseline ({args.variant}) on ws://{args.host}:{args.port}/v1/live/sessions",
          flush=True)
    try:
        loop.run(serve(args.variant, args.host, args.port))
    except KeyboardInterrupt:
        pass
    return 0

