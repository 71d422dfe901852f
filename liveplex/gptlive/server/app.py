"""The FastAPI app every GPT-Live server shares: the live path, `/health`, the demo page, 404s,
and the admin listener's app.

`create_app(front, ...)` builds the app around a `Front`: the one shared timer (`Sweeper`), the
set of live sockets and their counters, and the `Backend` behind them. The live socket itself is
served natively by `native.LiveProtocol` (uvicorn's `ws=`), which finds the front in the lifespan
state; through plain ASGI the live path is refused. A pod and the gateway add their own routes
(`add_routes`, `add_admin_routes`) and lifecycle (`lifecycle`); routes are listed in gpt-live §11
and docs/gptlive.md.

Every server listens twice (`run.listeners`): the client port, and an admin port that the
Service does not expose, where `/drain` (the preStop hook), `/metrics` (Prometheus) and the
operational JSON live. A request is routed by the listener it arrived on (`scope["server"]`), so
no admin route answers on the client port, whatever its path, and no client route on the admin
port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.routing import Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from websockets.datastructures import Headers

from liveplex.gptlive import urls
from liveplex.gptlive.server import auth, backend, exposition, native, replies
from liveplex.gptlive.server.settings import ServerSettings
from liveplex.gptlive.server.stats import FrontStats
from liveplex.gptlive.server.sweeper import Socket, Sweeper
from liveplex.gptlive.server.webrtc import route as webrtc_route
from liveplex.gptlive.server.webrtc.forward import Holders

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
    admin_port: int | None = None
    """The admin listener's port, once bound (`run.listeners`)."""
    calls: dict[str, Any] = field(default_factory=dict)
    """WebRTC calls by session id (`webrtc.call.Call`), for their sideband's attach."""
    holders: Holders | None = None
    """Where the other replicas' calls are (a gateway with `--peer-url`): an attach for one of
    theirs is relayed there (`webrtc.forward`); None: a lone server."""
    pending: dict[Any, None] = field(default_factory=dict)
    """Client-listener connections that have not finished a request, oldest first
    (`http_protocol.HttpProtocol`)."""

    def on_admin(self, server: tuple[str, int | None] | None) -> bool:
        """Whether a connection whose local address is `server` came in on the admin listener."""
        return server is not None and server[1] == self.admin_port

    @property
    def key_required(self) -> bool:
        """Whether a request must carry an API key (said in `/live/config`, for the demo page)."""
        return bool(self.settings.api_keys)

    def key(self, authorization: list[str]) -> str | None:
        """The API key an HTTP request carries (`auth.ANONYMOUS` without keys); None: refuse."""
        return auth.match_key(self.settings.api_keys, authorization)

    def refusal(self, headers: Headers, server: tuple[str, int | None] | None) -> tuple[int, bytes] | None:
        """Why an upgrade of the live path is refused (status, JSON body); None to accept."""
        if self.on_admin(server):
            return replies.NOT_FOUND
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


def add_admin_routes(admin: Starlette, front: Front, drain: Callable[[float | None], asyncio.Task[int]],
                     registry: CollectorRegistry) -> None:
    """The admin listener's routes every server has: `GET|POST /drain?deadline_s=S`, which blocks
    until drained or the deadline (a preStop hook waits on it), and `GET /metrics`, the Prometheus
    text of `registry` (503 with `--no-metrics`)."""

    async def drain_route(request: Request) -> Response:
        raw = request.query_params.get("deadline_s")
        try:
            deadline_s = None if raw is None else float(raw)
        except ValueError:
            deadline_s = -1.0
        if deadline_s is not None and not deadline_s >= 0:
            return JSONResponse({"error": {"param": "deadline_s", "message": "must be a number >= 0"}},
                                status_code=400)
        ended = await asyncio.shield(drain(deadline_s))  # a hung-up caller must not cancel it
        return JSONResponse({"drained": True, "ended_at_deadline": ended})

    async def metrics_route(request: Request) -> Response:
        if not front.settings.metrics:
            return PlainTextResponse("metrics are disabled", status_code=503)
        return Response(exposition.render(registry), media_type=exposition.CONTENT_TYPE)

    admin.add_route("/drain", drain_route, methods=["GET", "POST"])
    admin.add_route("/metrics", metrics_route, methods=["GET"])


def add_both(app: FastAPI, admin: Starlette, path: str, endpoint: Callable[[Request], Awaitable[Response]],
             guarded_by: Front | None = None) -> None:
    """One GET route on both listeners; `guarded_by`: on the client listener it needs the API key."""
    async def guarded(request: Request) -> Response:
        assert guarded_by is not None
        return guarded_by.guard(request) or await endpoint(request)

    app.add_api_route(path, endpoint if guarded_by is None else guarded, methods=["GET"])
    admin.add_route(path, endpoint, methods=["GET"])


class ByListener:
    """The ASGI app uvicorn serves: requests on the admin listener go to `admin`, the rest (and the
    lifespan) to `public`."""

    def __init__(self, front: Front, public: FastAPI, admin: Starlette) -> None:
        self._front = front
        self.public = public
        self.admin = admin

    async def __call__(self, scope: replies.Message, receive: replies.Receive, send: replies.Send) -> None:
        if scope["type"] != "lifespan" and self._front.on_admin(scope.get("server")):
            await self.admin(scope, receive, send)
        else:
            await self.public(scope, receive, send)


def create_app(front: Front, lifecycle: Callable[[], contextlib.AbstractAsyncContextManager[None]],
               add_routes: Callable[[FastAPI, Starlette], None], title: str) -> ByListener:
    """The client app and the admin app behind one listener switch; `add_routes(app, admin)` adds
    a server's own routes to both; `lifecycle` brackets serving (the backend's start and stop)."""
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
    webrtc_route.add(app, front)  # before the 404s of other live paths: the create and the attach
    app.router.routes.append(WebSocketRoute(urls.LIVE_PATH, replies.Refuse(replies.NOT_NATIVE)))
    app.router.routes.append(WebSocketRoute(urls.LIVE_PATH + "/{rest:path}",
                                            replies.Refuse(replies.UNSUPPORTED)))

    @app.api_route(urls.LIVE_PATH + "/{rest:path}", methods=["GET", "POST", "PUT", "DELETE"],
                   include_in_schema=False)
    async def unsupported(rest: str) -> Response:
        return replies.response(replies.UNSUPPORTED)

    async def health(_: Request) -> PlainTextResponse:  # Starlette passes the request (FastAPI injects it)
        return PlainTextResponse("ok")

    app.add_api_route("/health", health, methods=["GET"])
    admin = Starlette(routes=[Route("/health", health)])
    add_routes(app, admin)

    @app.get("/", include_in_schema=False)
    async def demo_page() -> Response:
        page = settings.static_dir / "index.html"
        if not page.is_file():
            return replies.response(replies.NOT_FOUND)
        return FileResponse(page)

    app.mount("/static", StaticFiles(directory=settings.static_dir, check_dir=False), name="static")
    app.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))

    admin.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))
    return ByListener(front, app, admin)
