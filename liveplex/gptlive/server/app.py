"""The Starlette app every GPT-Live server shares: the live path, `/health`, the demo page, 404s,
and the admin listener's app.

`create_app(front, ...)` builds the app around a `Front`: the one shared timer (`Sweeper`), the
set of live sockets and their counters, and the `Backend` behind them. The live socket itself is
served natively by `native.LiveProtocol` (uvicorn's `ws=`), which finds the front in the lifespan
state (`front.FRONT`); through plain ASGI the live path is refused. A pod and the gateway add their own routes
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

from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from liveplex.gptlive import urls
from liveplex.gptlive.server import exposition, replies
from liveplex.gptlive.server.front import FRONT, Front
from liveplex.gptlive.server.sweeper import Sweeper
from liveplex.gptlive.server.webrtc import route as webrtc_route

SHUTDOWN_GRACE_S = 2.0
"""At shutdown, how long sockets get to send `session.closed` before the backend stops."""

Guard = Callable[[Request], Response | None]
"""A route's auth check: None to serve, else the 401 to answer."""


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


def add_both(app: Starlette, admin: Starlette, path: str, endpoint: Callable[[Request], Awaitable[Response]],
             guarded_by: Front | None = None) -> None:
    """One GET route on both listeners; `guarded_by`: on the client listener it needs the API key."""
    async def guarded(request: Request) -> Response:
        assert guarded_by is not None
        return guarded_by.guard(request) or await endpoint(request)

    app.add_route(path, endpoint if guarded_by is None else guarded, methods=["GET"])
    admin.add_route(path, endpoint, methods=["GET"])


class ByListener:
    """The ASGI app uvicorn serves: requests on the admin listener go to `admin`, the rest (and the
    lifespan) to `public`."""

    def __init__(self, front: Front, public: Starlette, admin: Starlette) -> None:
        self._front = front
        self.public = public
        self.admin = admin

    async def __call__(self, scope: replies.Message, receive: replies.Receive, send: replies.Send) -> None:
        if scope["type"] != "lifespan" and self._front.on_admin(scope.get("server")):
            await self.admin(scope, receive, send)
        else:
            await self.public(scope, receive, send)


async def _not_found(request: Request, exc: Exception) -> Response:
    return replies.response(replies.NOT_FOUND)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    """A known path in another method: OpenAI's error shape, with the `Allow` Starlette worked out."""
    allow = exc.headers if isinstance(exc, HTTPException) else None
    status, body = replies.NOT_ALLOWED
    return Response(body, status_code=status, media_type="application/json", headers=allow)


def create_app(front: Front, lifecycle: Callable[[], contextlib.AbstractAsyncContextManager[None]],
               add_routes: Callable[[Starlette, Starlette], None]) -> ByListener:
    """The client app and the admin app behind one listener switch; `add_routes(app, admin)` adds
    a server's own routes to both; `lifecycle` brackets serving (the backend's start and stop)."""
    settings = front.settings

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[dict[str, Front]]:
        async with lifecycle():
            front.sweeper = Sweeper(settings.sweep_ms)
            sweeping = asyncio.create_task(front.sweeper.run())
            try:
                yield {FRONT: front}
            finally:
                await front.end_sessions(SHUTDOWN_GRACE_S)
                sweeping.cancel()
                await asyncio.gather(sweeping, return_exceptions=True)

    app = Starlette(lifespan=lifespan, exception_handlers={404: _not_found, 405: _not_allowed})
    webrtc_route.add(app, front)  # before the 404s of other live paths: the create and the attach
    app.router.routes.append(WebSocketRoute(urls.LIVE_PATH, replies.Refuse(replies.NOT_NATIVE)))
    app.router.routes.append(WebSocketRoute(urls.LIVE_PATH + "/{rest:path}",
                                            replies.Refuse(replies.UNSUPPORTED)))

    async def unsupported(_: Request) -> Response:
        return replies.response(replies.UNSUPPORTED)

    async def health(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def demo_page(_: Request) -> Response:
        page = settings.static_dir / "index.html"
        if not page.is_file():
            return replies.response(replies.NOT_FOUND)
        return FileResponse(page)

    app.add_route(urls.LIVE_PATH + "/{rest:path}", unsupported, methods=["GET", "POST", "PUT", "DELETE"])
    app.add_route("/health", health, methods=["GET"])
    admin = Starlette(routes=[Route("/health", health)])
    add_routes(app, admin)
    app.add_route("/", demo_page, methods=["GET"])

    app.mount("/static", StaticFiles(directory=settings.static_dir, check_dir=False), name="static")
    app.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))

    admin.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))
    return ByListener(front, app, admin)
