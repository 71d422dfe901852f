"""A pod's routes over the shared server app: models, voices, config, stats, metrics, ready, drain."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from liveplex.gptlive.server import app as server_app
from liveplex.gptlive.server import exposition, replies
from liveplex.pod import metrics, stats
from liveplex.pod.pod import Pod


def create_app(pod: Pod) -> FastAPI:
    """The pod's app; its lifespan is the pod's start and stop."""
    front = pod.front
    served = pod.served
    registry = exposition.registry(metrics.PodCollector(pod.snapshot))

    def add_routes(app: FastAPI) -> None:
        @app.get("/v1/models")
        async def models(request: Request) -> Response:
            return front.guard(request) or JSONResponse(replies.models_json(served.models))

        @app.get("/v1/audio/voices")
        async def audio_voices(request: Request) -> Response:
            return front.guard(request) or JSONResponse({"voices": served.voices.names()})

        @app.get("/live/config")
        async def live_config() -> dict[str, Any]:
            pacing = pod.engine.pacing
            return {**served.config(), "api_key_required": front.key_required,
                    "pacing": {"lead_ms": pacing.lead_ns / 1e6, "spread_ms": pacing.spread_ns / 1e6}}

        @app.get("/live/stats")
        async def live_stats() -> dict[str, Any]:
            return stats.stats_json(pod.snapshot())

        @app.get("/ready")
        async def ready() -> PlainTextResponse:
            if pod.ready:
                return PlainTextResponse("ready")
            return PlainTextResponse("draining" if pod.draining else "not ready", status_code=503)

        server_app.add_drain_route(app, pod.drain)

        server_app.add_metrics_route(app, front, registry)

    return server_app.create_app(front, pod.serving, add_routes, "liveplex")
