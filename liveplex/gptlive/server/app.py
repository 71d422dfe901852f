"""The FastAPI apps every GPT-Live server shares: the live path, `/health`, the demo page, 404s,
and the admin listener's app, each publishing its routes' contract at `/openapi.json` (`api`).

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

Interactive docs (`/docs`) are left out: FastAPI's pages load Swagger UI from a CDN, and a server
must work offline; `/openapi.json` is the document any viewer reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import FastAPI, Query
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import WebSocketRoute
from starlette.staticfiles import StaticFiles

from liveplex import __version__
from liveplex.gptlive import urls
from liveplex.gptlive.server import api, exposition, replies
from liveplex.gptlive.server.front import FRONT, Front
from liveplex.gptlive.server.sweeper import Sweeper
from liveplex.gptlive.server.webrtc import route as webrtc_route

SHUTDOWN_GRACE_S = 2.0
"""At shutdown, how long sockets get to send `session.closed` before the backend stops."""

Guard = Callable[[Request], Response | None]
"""A route's auth check: None to serve, else the 401 to answer."""


def add_admin_routes(admin: FastAPI, front: Front, drain: Callable[[float | None], asyncio.Task[int]],
                     registry: CollectorRegistry) -> None:
    """The admin listener's routes every server has: `GET|POST /drain?deadline_s=S`, which blocks
    until drained or the deadline (a preStop hook waits on it), and `GET /metrics`, the Prometheus
    text of `registry` (503 with `--no-metrics`)."""

    async def drain_route(
            deadline_s: Annotated[float | None, Query(ge=0, allow_inf_nan=False,
                                                      description="seconds to wait before ending what is left")] = None,
    ) -> Response:
        """Stop taking sessions and wait until every one ended, or `deadline_s` passed and the rest were ended."""
        ended = await asyncio.shield(drain(deadline_s))  # a hung-up caller must not cancel it
        return JSONResponse({"drained": True, "ended_at_deadline": ended})

    async def metrics_route() -> Response:
        """The Prometheus exposition (docs/observability.md)."""
        if not front.settings.metrics:
            return PlainTextResponse("metrics are disabled", status_code=503)
        return Response(exposition.render(registry), media_type=exposition.CONTENT_TYPE)

    for method in ("GET", "POST"):  # a preStop hook may use either
        admin.add_api_route("/drain", drain_route, methods=[method], response_model=api.Drained,
                            responses=api.failures(400), operation_id=f"drain_{method.lower()}")
    admin.add_api_route("/metrics", metrics_route, methods=["GET"], response_class=PlainTextResponse,
                        responses={200: api.TEXT, 503: api.TEXT})


def add_both(app: FastAPI, admin: FastAPI, path: str, endpoint: Callable[[Request], Awaitable[Response]],
             guarded_by: Front | None = None, **contract: Any) -> None:
    """One GET route on both listeners; `guarded_by`: on the client listener it needs the API key.
    `contract` is the route's `response_model`, `responses`... as FastAPI takes them."""
    async def guarded(request: Request) -> Response:
        assert guarded_by is not None
        return guarded_by.guard(request) or await endpoint(request)

    guarded.__doc__ = endpoint.__doc__
    public = contract if guarded_by is None else {**contract, "responses": {
        **contract.get("responses", {}), **api.failures(401)}}
    app.add_api_route(path, endpoint if guarded_by is None else guarded, methods=["GET"], **public)
    admin.add_api_route(path, endpoint, methods=["GET"], **contract)


class ByListener:
    """The ASGI app uvicorn serves: requests on the admin listener go to `admin`, the rest (and the
    lifespan) to `public`."""

    def __init__(self, front: Front, public: FastAPI, admin: FastAPI) -> None:
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


def _fastapi(**kwargs: Any) -> FastAPI:
    """A listener's app: `/openapi.json` and no CDN-served docs pages; errors in OpenAI's shape."""
    return FastAPI(title="liveplex", version=__version__, docs_url=None, redoc_url=None,
                   exception_handlers={404: _not_found, 405: _not_allowed,
                                       RequestValidationError: api.invalid_request}, **kwargs)


def create_app(front: Front, lifecycle: Callable[[], contextlib.AbstractAsyncContextManager[None]],
               add_routes: Callable[[FastAPI, FastAPI], None]) -> ByListener:
    """The client app and the admin app behind one listener switch; `add_routes(app, admin)` adds
    a server's own routes to both; `lifecycle` brackets serving (the backend's start and stop)."""
    settings = front.settings

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Front]]:
        async with lifecycle():
            front.sweeper = Sweeper(settings.sweep_ms)
            sweeping = asyncio.create_task(front.sweeper.run())
            try:
                yield {FRONT: front}
            finally:
                await front.end_sessions(SHUTDOWN_GRACE_S)
                sweeping.cancel()
                await asyncio.gather(sweeping, return_exceptions=True)

    app = _fastapi(lifespan=lifespan, description="A GPT-Live server's client listener (docs/gptlive.md).")
    webrtc_route.add(app, front)  # before the 404s of other live paths: the create and the attach
    app.router.routes.append(WebSocketRoute(urls.LIVE_PATH, replies.Refuse(replies.NOT_NATIVE)))
    app.router.routes.append(WebSocketRoute(urls.LIVE_PATH + "/{rest:path}",
                                            replies.Refuse(replies.UNSUPPORTED)))

    async def unsupported() -> Response:
        return replies.response(replies.UNSUPPORTED)

    async def health() -> PlainTextResponse:
        """Alive (the liveness probe); `/ready` says whether it takes sessions."""
        return PlainTextResponse("ok")

    async def demo_page() -> Response:
        """The demo page (docs/demo.md)."""
        page = settings.static_dir / "index.html"
        if not page.is_file():
            return replies.response(replies.NOT_FOUND)
        return FileResponse(page)

    admin = _fastapi(description="A GPT-Live server's admin listener: probes, drain, metrics (docs/gptlive.md).")
    for listener in (app, admin):
        listener.add_api_route("/health", health, methods=["GET"], response_class=PlainTextResponse,
                               responses={200: api.TEXT})
    add_routes(app, admin)  # before the 404 of other live paths: a gateway's stored-session routes
    app.add_api_route(urls.LIVE_PATH + "/{rest:path}", unsupported, methods=["GET", "POST", "PUT", "DELETE"],
                      include_in_schema=False)
    app.add_api_route("/", demo_page, methods=["GET"], response_class=FileResponse,
                      responses={200: {"content": {"text/html": {"schema": {"type": "string"}}}}})

    app.mount("/static", StaticFiles(directory=settings.static_dir, check_dir=False), name="static")
    app.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))

    admin.router.routes.append(WebSocketRoute("/{path:path}", replies.Refuse(replies.NOT_FOUND)))
    return ByListener(front, app, admin)
