"""The FastAPI app every GPT-Live server shares: the live path, `/health`, the demo page, 404s.

`create_app(front, ...)` builds the app around a `Front`: the one shared timer (`Sweeper`), the
set of live sockets and their counters, and the `Backend` behind them. The live socket itself is
served natively by `native.LiveProtocol` (uvicorn's `ws=`), which finds the front in the lifespan
state; through plain ASGI the live path is refused. A pod and the gateway add their own routes
(`add_routes`) and lifecycle (`lifecycle`); routes are listed in gpt-live §11 and docs/gptlive.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry
from starlette.routing import WebSocketRoute
from starlette.staticfiles import StaticFiles
from websockets.datastructures import Headers

from liveplex.gptlive.server import auth, backend, exposition, native, replies
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.gptlive.server.stats import FrontStats
from liveplex.gptlive.server.sweeper import Socket, Sweeper

SHUTDOWN_GRACE_S = 2.0
"""At shutdown, how long sockets get to send `session.closed` before the backend stops."""

Guard = Callable[[Request], Response | None]
"""A route's auth check: None to serve, else the 401 to answer."""


@dataclass(slots=True)
class Front:
    """What the routes and the native live sockets share; the sweeper exists while serving."""

    settings: ServerSettings
    backend: backend.Backend
    stats: FrontStats = field(default_factory=FrontStats)
    sweeper: Sweeper | None = None
    sockets: set[Socket] = field(default_factory=set)

    @property
    def key_required(self) -> bool:
        """Whether a request must carry an API key (said in `/live/config`, for the demo page)."""
        return bool(self.settings.api_keys)

    def key(self, authorization: list[str]) -> str | None:
        """The API key an HTTP request carries (`auth.ANONYMOUS` without keys); None: refuse."""
        return auth.match_key(self.settings.api_keys, authorization)

    def refusal(self, headers: Headers) -> tuple[int, bytes] | None:
        """Why an upgrade of the live path is refused (status, JSON body); None to accept."""
        if auth.upgrade_key(self.settings.api_keys, headers) is None:
            return replies.UNAUTHORIZED
        if self.sweeper is None:
            return replies.NOT_READY
        return self.backend.refusal()

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
                while self.sockets:
                    await asyncio.sleep(0.02)


def add_drain_route(app: FastAPI, drain: Callable[[float | None], asyncio.Task[int]]) -> None:
    """`GET|POST /drain?deadline_s=S`: blocks until drained or the deadline (a preStop hook waits on it)."""

    @app.api_route("/drain", methods=["GET", "POST"])
    async def drain_route(deadline_s: float | None = None) -> Response:
        if deadline_s is not None and deadline_s < 0:
            return JSONResponse({"error": {"param": "deadline_s", "message": "must be >= 0"}}, status_code=400)
        ended = await asyncio.shield(drain(deadline_s))  # a hung-up caller must not cancel it
        return JSONResponse({"drained": True, "ended_at_deadline": ended})


def add_metrics_route(app: FastAPI, front: Front, registry: CollectorRegistry) -> None:
    """`GET /metrics`: the Prometheus text of `registry`; 503 with `--no-metrics`."""

    @app.get("/metrics")
    async def metrics_route() -> Response:
        if not front.settings.metrics:
            return PlainTextResponse("metrics are disabled", status_code=503)
        return Response(exposition.render(registry), media_type=exposition.CONTENT_TYPE)


def create_app(front: Front, lifecycle: Callable[[], contextlib.AbstractAsyncContextManager[None]],
               add_routes: Callable[[FastAPI], None], title: str) -> FastAPI:
    """The app over `front`; `lifecycle` brackets serving (the backend's start and stop)."""
    settings = front.settings

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Front]]:
        async with lifecycle():
            front.sweeper = Sweeper(settings.sweep_ms)
            sweeping = asyncio.create_task(front.sweeper.run())
            try:
                yield {native.FRONT: front}
            finally:
                await front.end_sessions(SHUTDOWN_GRACE_S)
                sweeping.cancel()
                await asyncio.gather(sweeping, return_exceptions=True)

    app = FastAPI(title=title, lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.router.routes.append(WebSocketRoute(native.LIVE_PATH, replies.Refuse(replies.NOT_NATIVE)))
    app.router.routes.append(WebSocketRoute(native.LIVE_PATH + "/{rest:path}",
                                            replies.Refuse(replies.UNSUPPORTED)))

    @app.api_route(native.LIVE_PATH + "/{rest:path}", methods=["GET", "POST", "PUT", "DELETE"],
                   include_in_schema=False)
    async def unsupported(rest: str) -> Response:
        return replies.response(replies.UNSUPPORTED)

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

    add_routes(app)

    @app.get("/", include_in_schema=False)
    async def demo_page() -> Response:
        page = settings.static_dir / "index.html"
        if not page.is_file():
            return replies.response(replies.NOT_FOUND)
        return FileResponse(page)

    app.mount("/static", StaticFiles(directory=settings.static_dir, check_dir=False), name="static")
    app.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))
    return app
