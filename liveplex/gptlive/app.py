"""The FastAPI app of a pod: the GPT-Live socket, the auxiliary endpoints and the demo page.

`create_app(settings, runner)` starts the engine thread in the lifespan (with the running loop, so
outputs wake receivers on it) and stops it at shutdown, after ending every live session with
`server_shutdown`. The live socket is served natively by `native.LiveProtocol` (uvicorn's `ws=`),
which finds the front end in the lifespan state; through ASGI the live path is refused. Routes
are listed in gpt-live §11 and docs/gptlive.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import WebSocketRoute
from starlette.staticfiles import StaticFiles

from liveplex.gptlive import metrics, native, socket
from liveplex.gptlive.connection import Connection
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.socket import Message, Receive, Send, Sweeper
from liveplex.gptlive.tally import Tally
from liveplex.gptlive.voices import DEFAULT_VOICE, Voices, registry_ids
from liveplex.live import channel, contract, frames
from liveplex.live.pulse import Buckets
from liveplex.live.runner import EngineThread

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2.0
"""At shutdown, how long sockets get to send `session.closed` before the engine stops."""


@dataclass(slots=True)
class Front:
    """What the routes and the native live socket share: fixed at creation, except the handle
    and sweeper of the lifespan."""

    settings: Settings
    info: contract.LiveInfo
    voices: Voices
    runner: EngineThread
    tally: Tally = field(default_factory=Tally)
    handle: channel.LiveHandle | None = None
    sweeper: Sweeper | None = None
    sockets: set[socket.Socket] = field(default_factory=set)

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        token = self.settings.auth_token
        if token is None:
            return True
        expected = b"bearer " + token.encode()
        for name, value in headers:
            if name.lower() == b"authorization":
                return hmac.compare_digest(value[:7].lower() + value[7:], expected)
        return False

    def refusal(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes] | None:
        """Why an upgrade of the live path is refused (status, JSON body); None to accept."""
        if not self.authorized(headers):
            return _UNAUTHORIZED
        if self.handle is None or self.sweeper is None:
            return _NOT_READY
        return None

    def connection(self) -> Connection:
        """The protocol core of a new live socket."""
        return Connection(self.info, self.settings, self.voices, self.tally, time.monotonic_ns())


def _openai_error(status: int, code: str, message: str) -> tuple[int, bytes]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"type": kind, "code": code, "message": message, "param": None}}
    return status, orjson.dumps(body)


_UNAUTHORIZED = _openai_error(401, "invalid_api_key", "Missing or invalid bearer token.")
_UNSUPPORTED = _openai_error(404, "unsupported_endpoint",
                             "This server supports only the primary socket /v1/live/sessions.")
_NOT_FOUND = _openai_error(404, "not_found", "No such endpoint.")
_NOT_READY = _openai_error(503, "server_error", "The engine is not running.")
_NOT_NATIVE = _openai_error(500, "server_error",
                            "The live socket needs uvicorn with ws=liveplex.gptlive.native.LiveProtocol.")


async def _deny(scope: Message, send: Send, reply: tuple[int, bytes]) -> None:
    """Refuse a WebSocket upgrade with an HTTP status and a JSON body (gpt-live §2.1)."""
    status, body = reply
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "websocket.http.response.body", "body": body})


class _Refuse:
    """ASGI handler that refuses every WebSocket upgrade on its paths with an HTTP error."""

    def __init__(self, reply: tuple[int, bytes]) -> None:
        self._reply = reply

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if (await receive())["type"] == "websocket.connect":
            await _deny(scope, send, self._reply)


def _histogram(buckets: Buckets | None) -> dict[str, list[float] | list[int]]:
    """A `Pulse` histogram for `/live/stats`: upper bounds and per-bucket counts (last is +Inf)."""
    if buckets is None:
        return {"bounds_s": [], "counts": []}
    return {"bounds_s": list(buckets.bounds), "counts": list(buckets.counts)}


def _json(reply: tuple[int, bytes]) -> Response:
    return Response(reply[1], status_code=reply[0], media_type="application/json")


def create_app(settings: Settings, runner: EngineThread) -> FastAPI:
    """The pod's app over `runner`; the lifespan starts and stops the engine thread."""
    info = runner.info
    voices = Voices(info.voices, settings.builtin_voices, registry_ids(settings.voice_dir))
    front = Front(settings, info, voices, runner)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Front]]:
        front.handle = runner.start(asyncio.get_running_loop())
        front.sweeper = Sweeper(settings.sweep_ms)
        sweeping = asyncio.create_task(front.sweeper.run())
        try:
            yield {native.FRONT: front}
        finally:
            for live in list(front.sockets):
                live.shutdown()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SHUTDOWN_GRACE_S):
                    while front.sockets:
                        await asyncio.sleep(0.02)
            sweeping.cancel()
            await asyncio.gather(sweeping, return_exceptions=True)
            await asyncio.to_thread(runner.stop)

    app = FastAPI(title="liveplex", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    collector = metrics.LiveCollector(
        info, lambda: front.handle.pulse if front.handle else None, front.tally,
        lambda: runner.ready)
    registry = metrics.registry(collector)

    def guarded(request: Request) -> Response | None:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()]
        return None if front.authorized(headers) else _json(_UNAUTHORIZED)

    app.router.routes.append(WebSocketRoute("/v1/live/sessions", _Refuse(_NOT_NATIVE)))
    app.router.routes.append(WebSocketRoute("/v1/live/sessions/{rest:path}",
                                            _Refuse(_UNSUPPORTED)))

    @app.api_route("/v1/live/sessions/{rest:path}", methods=["GET", "POST", "PUT", "DELETE"],
                   include_in_schema=False)
    async def unsupported(rest: str) -> Response:
        return _json(_UNSUPPORTED)

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        if (denied := guarded(request)) is not None:
            return denied
        ids = [info.model, *(a for a in settings.model_aliases if a != info.model)]
        return JSONResponse({"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "liveplex"} for m in ids]})

    @app.get("/v1/audio/voices")
    async def audio_voices(request: Request) -> Response:
        if (denied := guarded(request)) is not None:
            return denied
        return JSONResponse({"voices": voices.names()})

    @app.get("/live/config")
    async def live_config() -> dict[str, Any]:
        return {
            **dict(info.engine), "model": info.model, "sample_rate": info.sample_rate,
            "frame_ms": info.frame_ms(1), "voices": voices.names(), "voice": DEFAULT_VOICE,
            "instructions": info.default_instructions,
            "max_instructions_chars": info.max_instructions_chars,
            "max_seconds": info.frame_ms(info.max_frames) / 1000,
            "formats": [{"type": "audio/pcm", "rate": 24000}, {"type": "audio/pcm", "rate": 16000},
                        {"type": "audio/pcmu", "rate": 8000}, {"type": "audio/pcma", "rate": 8000}],
        }

    @app.get("/live/stats")
    async def live_stats() -> dict[str, Any]:
        pulse = front.handle.pulse if front.handle else None
        t = front.tally
        return {
            **dict(info.engine),
            "sessions": pulse.sessions if pulse else 0, "max_sessions": info.max_sessions,
            "frame_ms": frames.FRAME_MS, "ticks": pulse.ticks if pulse else 0,
            "tick_busy_us": pulse.busy_us if pulse else 0,
            "last_tick_us": pulse.last_tick_us if pulse else 0,
            "late_ticks": pulse.late_ticks if pulse else 0,
            "sockets": t.sockets_open, "underruns": t.underruns,
            "dropped_samples": t.dropped_samples, "refused_busy": t.rejected["server_busy"],
            "tick_lateness": _histogram(pulse.lateness if pulse else None),
            "tick_duration": _histogram(pulse.duration if pulse else None),
            "batch_size": _histogram(pulse.batch if pulse else None),
            "prefill": _histogram(pulse.prefill if pulse else None),
            "kv_occupancy": pulse.kv_positions / pulse.kv_capacity if pulse and pulse.kv_capacity else None,
        }

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/ready")
    async def ready() -> PlainTextResponse:
        if runner.ready and front.handle is not None:
            return PlainTextResponse("ready")
        return PlainTextResponse("not ready", status_code=503)

    @app.get("/metrics")
    async def metrics_text() -> Response:
        if not settings.metrics:
            return PlainTextResponse("metrics are disabled", status_code=503)
        return Response(metrics.render(registry),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/", include_in_schema=False)
    async def demo_page() -> Response:
        page = settings.static_dir / "index.html"
        if not page.is_file():
            return _json(_NOT_FOUND)
        return FileResponse(page)

    app.mount("/static", StaticFiles(directory=settings.static_dir, check_dir=False),
              name="static")
    app.router.routes.append(WebSocketRoute("/{path:path}", _Refuse(_NOT_FOUND)))
    return app
