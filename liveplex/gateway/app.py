"""The gateway's routes over the shared server app: models, config, stats and ready for clients;
drain, metrics, stats, config and ready on the admin listener. The live path and the demo page
are the shared app's."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from liveplex.gateway.gateway import Gateway
from liveplex.gateway.metrics import GatewayCollector
from liveplex.gateway.stored import CONTENT_PATH, HANGUP_PATH, StoredRoutes
from liveplex.gptlive.server import api, exposition, replies
from liveplex.gptlive.server import app as server_app
from liveplex.placement import PoolLoad


def create_app(gateway: Gateway) -> server_app.ByListener:
    front = gateway.front
    registry = exposition.registry(GatewayCollector(gateway.stats, front.stats, lambda: gateway.view.catalog.pools()))

    def loads() -> dict[str, PoolLoad]:
        return {pool: summary.load for pool, (summary, _) in gateway.view.snapshots.items()}

    async def ready(request: Request) -> Response:
        """200 while the gateway takes new sessions; 503 before its first Redis read and while draining."""
        if gateway.ready:
            return PlainTextResponse("ready")
        return PlainTextResponse("draining" if gateway.draining else "redis unreachable", status_code=503)

    async def live_config(request: Request) -> Response:
        """The default pool's description as this gateway serves it (`PoolCatalog.advertised`), its
        capacity summed over its fresh pods."""
        catalog = gateway.view.catalog
        pool = catalog.default_pool or next(iter(catalog.pools()), None)
        served = catalog.advertised(pool) if pool else None
        if served is None:
            why = "no engine has published a config naming a model routed to its pool yet"
            return replies.response(replies.openai_error(503, "server_error", why))
        load = loads().get(pool) if pool else None
        return JSONResponse({**served.config(), "pool": pool, "max_sessions": load.capacity if load else 0,
                             **front.page_config()})

    async def live_stats(request: Request) -> Response:
        """The load of the pools this gateway places on, summed and per pool."""
        pools = loads()
        return JSONResponse({
            "sessions": sum(p.active for p in pools.values()),
            "reserved": sum(p.reserved for p in pools.values()),
            "max_sessions": sum(p.capacity for p in pools.values()),
            "pods": sum(p.fresh for p in pools.values()),
            "relayed": sum(gateway.stats.sessions_active.values()),
            "sockets": front.stats.sockets_open,
            "pools": {pool: {"sessions": p.active, "reserved": p.reserved, "capacity": p.capacity,
                             "pods": p.fresh, "draining": p.draining} for pool, p in pools.items()},
        })

    def add_routes(app: FastAPI, admin: FastAPI) -> None:
        server_app.add_admin_routes(admin, front, gateway.drain, registry)
        server_app.add_both(app, admin, "/ready", ready, response_class=PlainTextResponse,
                            responses={200: api.TEXT, 503: api.TEXT})
        server_app.add_both(app, admin, "/live/config", live_config, response_model=api.LiveConfig,
                            responses=api.failures(503))
        server_app.add_both(app, admin, "/live/stats", live_stats, guarded_by=front, response_model=api.GatewayStats)

        async def models(request: Request) -> Response:
            """Every model this gateway places sessions of (`client.models.list()`)."""
            return front.guard(request) or JSONResponse(replies.models_json(gateway.view.catalog.models()))

        app.add_api_route("/v1/models", models, methods=["GET"], response_model=api.ModelList,
                          responses=api.failures(401))
        stored = StoredRoutes(gateway)
        app.add_api_route(CONTENT_PATH, stored.content, methods=["GET"], response_class=Response,
                          responses={200: api.RECORDING, **api.failures(401, 404, 503)},
                          operation_id="download_recording")
        app.add_api_route(HANGUP_PATH, stored.hangup, methods=["POST"], status_code=204, response_class=Response,
                          responses={204: api.NO_CONTENT, **api.failures(401, 404)}, operation_id="hangup")

    return server_app.create_app(front, gateway.serving, add_routes)
