"""The gateway's routes over the shared server app: ready, drain, models, pool stats and config,
metrics. The live path and the demo page are the shared app's."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from liveplex.gateway.gateway import Gateway
from liveplex.gateway.metrics import GatewayCollector
from liveplex.gptlive.server import app as server_app
from liveplex.gptlive.server import exposition, replies
from liveplex.placement import PoolLoad


def create_app(gateway: Gateway) -> FastAPI:
    front = gateway.front
    registry = exposition.registry(GatewayCollector(gateway.stats, lambda: front.stats.sockets_open))

    def loads() -> dict[str, PoolLoad]:
        return {pool: PoolLoad.of(snap) for pool, (snap, _) in gateway.view.snapshots.items()}

    def add_routes(app: FastAPI) -> None:
        @app.get("/ready")
        async def ready() -> PlainTextResponse:
            if gateway.ready:
                return PlainTextResponse("ready")
            return PlainTextResponse("draining" if gateway.draining else "redis unreachable", status_code=503)

        server_app.add_drain_route(app, gateway.drain)

        @app.get("/v1/models")
        async def models(request: Request) -> Response:
            return front.guard(request) or JSONResponse(replies.models_json(gateway.view.catalog.models()))

        @app.get("/live/config")
        async def live_config() -> Response:
            """The default pool's description, its capacity summed over its fresh pods."""
            catalog = gateway.view.catalog
            pool = catalog.default_pool or next(iter(catalog.pools()), None)
            served = catalog.served.get(pool) if pool else None
            if served is None:
                return JSONResponse({"error": {"message": "no engine has published a config yet"}},
                                    status_code=503)
            load = loads().get(pool) if pool else None
            return JSONResponse({**served.config(), "pool": pool,
                                 "max_sessions": load.capacity if load else 0,
                                 "api_key_required": front.key_required})

        @app.get("/live/stats")
        async def live_stats() -> dict[str, Any]:
            pools = loads()
            return {
                "sessions": sum(p.active for p in pools.values()),
                "reserved": sum(p.reserved for p in pools.values()),
                "max_sessions": sum(p.capacity for p in pools.values()),
                "pods": sum(p.fresh for p in pools.values()),
                "relayed": sum(gateway.stats.sessions_active.values()),
                "sockets": front.stats.sockets_open,
                "pools": {pool: {"sessions": p.active, "reserved": p.reserved, "capacity": p.capacity,
                                 "pods": p.fresh, "draining": p.draining} for pool, p in pools.items()},
            }

        server_app.add_metrics_route(app, front, registry)

    return server_app.create_app(front, gateway.serving, add_routes, "liveplex gateway")
