"""A pod's routes over the shared server app: models, voices, config and ready for clients, and the
handover routes for gateways (docs/continuity.md); drain, metrics, stats, config and ready on the
admin listener."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from fastapi import FastAPI, Query
from starlette.convertors import StringConvertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from liveplex.continuity import blob, record
from liveplex.continuity.errors import HandoverError
from liveplex.gptlive.server import api, exposition, hop, replies
from liveplex.gptlive.server import app as server_app
from liveplex.live.contract import LiveInfo
from liveplex.pod import handover, metrics, stats
from liveplex.pod.pod import Pod


class ExportedId(StringConvertor):
    """A session id in `hop.EXPORT_PATH`: any path segment but the handover routes' own names
    (`hop.RESUME_PATH`'s last), so the routes match the same whatever order they are added in."""

    regex = f"(?!{re.escape(hop.RESUME_PATH.rsplit('/', 1)[1])}$)[^/]+"


register_url_convertor("exported_id", ExportedId())
EXPORT_ROUTE = hop.EXPORT_PATH.format(session_id="{session_id:exported_id}")
"""`hop.EXPORT_PATH` as the pod routes it."""


def create_app(pod: Pod) -> server_app.ByListener:
    """The pod's app; its lifespan is the pod's start and stop."""
    front = pod.front
    served = pod.served
    registry = exposition.registry(metrics.PodCollector(pod.snapshot))

    async def live_config(request: Request) -> Response:
        """What this pod serves and how to call it (public: the demo page reads it before a key)."""
        pacing = pod.engine.pacing
        return JSONResponse({**served.config(), **front.page_config(),
                             "pacing": {"lead_ms": pacing.lead_ns / 1e6, "spread_ms": pacing.spread_ns / 1e6}})

    async def live_stats(request: Request) -> Response:
        """The pod's load, ticks and callers (docs/pod.md)."""
        return JSONResponse(stats.stats_json(pod.snapshot()))

    async def ready(request: Request) -> Response:
        """200 while the pod takes new sessions; 503 while starting or draining (the readiness probe)."""
        if pod.ready:
            return PlainTextResponse("ready")
        return PlainTextResponse("draining" if pod.draining else "not ready", status_code=503)

    def add_routes(app: FastAPI, admin: FastAPI) -> None:
        server_app.add_admin_routes(admin, front, pod.drain, registry)
        server_app.add_both(app, admin, "/live/config", live_config, response_model=api.LiveConfig)
        server_app.add_both(app, admin, "/live/stats", live_stats, guarded_by=front, response_model=api.PodStats)
        server_app.add_both(app, admin, "/ready", ready, response_class=PlainTextResponse,
                            responses={200: api.TEXT, 503: api.TEXT})

        async def models(request: Request) -> Response:
            """The `session.model` names this pod serves (`client.models.list()`)."""
            return front.guard(request) or JSONResponse(replies.models_json(served.models))

        async def held(request: Request, peek: Callable[[bytes, LiveInfo], blob.Header | HandoverError]) -> Response:
            """Check a blob or a record (`peek`) and hold it for the socket that continues it."""
            denied = front.guard(request)
            if denied is not None:
                return denied
            if pod.draining or pod.backend.handle is None:
                return replies.response(replies.NOT_READY)
            data = await handover.read_body(request)
            if data is None:
                return replies.response(replies.openai_error(
                    413, "handover_too_large", f"A blob is at most {handover.MAX_BLOB_BYTES} bytes."))
            header = peek(data, served.info)
            if isinstance(header, HandoverError):
                return handover.refused(header)
            key = pod.backend.imports.put(data, header, handover.now())
            return replies.response(handover.FULL) if key is None else handover.imported(key, header)

        async def export(request: Request, session_id: str, after: Annotated[int, Query(
                alias=hop.EXPORT_AFTER, ge=0, description="messages the gateway had sent on the session's socket")] = 0,
        ) -> Response:
            """Hand the session over at its next tick boundary: its blob (a gateway moving it)."""
            denied = front.guard(request)
            if denied is not None:
                return denied
            got = await pod.backend.export(session_id, after)
            return replies.response(got) if isinstance(got, tuple) else handover.exported(got)

        async def import_(request: Request) -> Response:
            """Hold a session's handover blob for the socket that continues it (a move's target)."""
            return await held(request, blob.peek)

        async def resume(request: Request) -> Response:
            """Hold a lost session's resume record for the socket that continues it."""
            return await held(request, record.peek)

        async def audio_voices(request: Request) -> Response:
            """The `voice` names a session may ask for."""
            return front.guard(request) or JSONResponse({"voices": served.voices.names()})

        handover_failures = api.failures(400, 401, 413, 503)
        app.add_api_route("/v1/models", models, methods=["GET"], response_model=api.ModelList,
                          responses=api.failures(401))
        app.add_api_route(EXPORT_ROUTE, export, methods=["POST"], response_class=Response,
                          responses={200: api.BLOB, **api.failures(400, 401, 404, 409, 503)})
        blob_body = {"requestBody": {"required": True, **api.BLOB}}
        app.add_api_route(hop.IMPORT_PATH, import_, methods=["POST"], status_code=201, response_model=api.Imported,
                          responses=handover_failures, openapi_extra=blob_body)
        app.add_api_route(hop.RESUME_PATH, resume, methods=["POST"], status_code=201, response_model=api.Imported,
                          responses=handover_failures, openapi_extra=blob_body)
        app.add_api_route("/v1/audio/voices", audio_voices, methods=["GET"], response_model=api.VoiceList,
                          responses=api.failures(401))

    return server_app.create_app(front, pod.serving, add_routes)
