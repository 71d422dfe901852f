"""The HTTP contract of a GPT-Live server's routes, pods' and gateways' alike: what each answers, as
pydantic models that FastAPI publishes at `/openapi.json` on each listener, and every failure in
OpenAI's error shape (`{"error": {"type", "code", "message", "param"}}`), FastAPI's own validation
failures included, naming the parameter.

The routes keep writing their answers themselves (the bytes a client gets are the ones tested for
years, and `/live/stats` is polled every second): the models here are the contract those answers
are held to, by `tests/gptlive/test_openapi.py`, which calls every route of every listener's
document and validates what comes back against it, and compares the GPT-Live routes' models with
the `openai` SDK's own types. The live socket and the sideband are WebSockets, outside OpenAPI
(docs/gptlive.md, docs/webrtc.md).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict
from starlette.responses import Response

from liveplex.gptlive.server import replies


class ErrorBody(BaseModel):
    type: Literal["invalid_request_error", "server_error"]
    code: str | None
    message: str
    param: str | None
    """The request parameter at fault (a query parameter's name, a body's dotted path), else null."""


class ErrorResponse(BaseModel):
    """Every failure of every route: OpenAI's error shape."""

    error: ErrorBody


def failures(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route that may fail with `statuses`, each in `ErrorResponse`'s shape."""
    return {status: {"model": ErrorResponse, "description": _WHY.get(status, "refused")} for status in statuses}


_WHY = {400: "a parameter or the body is invalid (`param` names it)", 401: "the API key is missing or wrong",
        404: "no such thing here", 409: "not in a state to do that", 413: "the body is too large",
        501: "not served by this install", 503: "not ready, draining, or full (`server_busy`)"}

TEXT = {"content": {"text/plain": {"schema": {"type": "string"}}}}
"""A plain-text answer (`/health`, `/ready`, `/metrics`), for `responses=`."""

BLOB = {"content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}
"""An opaque binary body (a session's handover blob), for `responses=` and `openapi_extra`."""

RECORDING = {"description": "the stored session's recording: a 24 kHz 16-bit WAV, channel 0 the caller, "
                            "channel 1 the agent (docs/storage.md)",
             "content": {"audio/wav": {"schema": {"type": "string", "format": "binary"}}}}
"""`GET /v1/live/sessions/{id}/content` (`client.live.sessions.download_recording`, which takes any
binary body: it asks for `application/binary`)."""
NO_CONTENT = {"description": "done (`client.live.sessions.hangup` returns None)"}


# --- GPT-Live's own routes: the SDK's types are the oracle ------------------------------------------

class Model(BaseModel):
    """`openai.types.Model`."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    shutdown_date: str | None = None
    """Left out: no model a server serves has a shutdown announced."""


class ModelList(BaseModel):
    """`GET /v1/models`: OpenAI's list shape (`client.models.list()`)."""

    object: Literal["list"]
    data: list[Model]


class WebRtcTransport(BaseModel):
    """`live_create_params.Transport` / `live_create_response.Transport`."""

    type: Literal["webrtc"]
    sdp: str


class LiveCreateRequest(BaseModel):
    """`client.live.create`'s body (`LiveCreateParams`): the session is `MediaSessionConfig`, checked as
    a socket's `session.start` is (the same errors and parameter paths), so it is an open object here."""

    session: dict[str, Any]
    transport: WebRtcTransport


class LiveForkRequest(BaseModel):
    """`client.live.sessions.fork`'s body (`SessionForkParams`): `session` is the overrides
    (`MediaSessionForkConfigParam`: `client`, `delegation`, `store`), merged into the stored
    session's settings (`gptlive.fork`); omitted or empty, the stored ones."""

    session: dict[str, Any] | None = None
    transport: WebRtcTransport


class CreatedSession(BaseModel):
    """`live_create_response.Session`."""

    id: str


class LiveCreateResponse(BaseModel):
    """`POST /v1/live/sessions`' answer (`LiveCreateResponse`): the session's id and the SDP answer."""

    session: CreatedSession
    transport: WebRtcTransport


class VoiceList(BaseModel):
    """`GET /v1/audio/voices`: the `voice` names a session may ask for."""

    voices: list[str]


class IceServer(BaseModel):
    """`RTCIceServer`, as a browser's `RTCPeerConnection` takes it."""

    urls: list[str]
    username: str | None = None
    credential: str | None = None


class IceServers(BaseModel):
    """`GET /v1/live/ice_servers` (a liveplex extension): the STUN/TURN servers for one call."""

    ice_servers: list[IceServer]
    expires_at: int | None
    """Unix seconds after which the TURN login is refused; null without TURN."""


# --- liveplex's own routes ------------------------------------------------------------------------

class Format(BaseModel):
    type: str
    rate: int


class Pacing(BaseModel):
    lead_ms: float
    spread_ms: float


class LiveConfig(BaseModel):
    """`GET /live/config`: what the server serves (`gptlive.served.Served.config`), and how to call
    it. An engine's own settings (the sim's `echo_frames`, PersonaPlex's `schedule`) are further keys."""

    model_config = ConfigDict(extra="allow")

    model: str
    models: list[str]
    sample_rate: int
    frame_ms: float
    frame_samples: int
    voices: list[str]
    voice: str
    instructions: str
    max_instructions_chars: int
    max_seconds: float
    max_frames: int
    max_sessions: int
    context_frames: int
    tick_groups: int
    formats: list[Format]
    native_voices: list[str]
    default_native_voice: str
    voice_map: dict[str, str]
    custom_voices: list[str]
    engine: list[list[str]]
    api_key_required: bool
    transports: list[Literal["websocket", "webrtc"]]
    """What a call may use: `webrtc` where the server has the `webrtc` extra."""
    pacing: Pacing | None = None
    """A pod's: how its audio deltas are paced out (docs/pod.md)."""
    pool: str | None = None
    """A gateway's: the pool this description is of."""


class Histogram(BaseModel):
    bounds_s: list[float]
    counts: list[int]
    """Per bucket; the last is +Inf."""
    sum_s: float


class PodStats(BaseModel):
    """A pod's `GET /live/stats` (`pod.stats.stats_json`); the engine's settings are further keys."""

    model_config = ConfigDict(extra="allow")

    sessions: int
    reserved: int
    parked: int
    max_sessions: int
    frame_ms: float
    ticks: int
    tick_busy_us: float
    last_tick_us: float
    late_ticks: int
    ticks_late: int
    draining: bool
    sockets: int
    underruns: int
    dropped_samples: int
    refused_busy: int
    dropped_connections: dict[str, int]
    tick_lateness: Histogram
    tick_duration: Histogram
    batch_size: Histogram
    prefill: Histogram
    caller_wait: Histogram
    kv_occupancy: float | None


class PoolStats(BaseModel):
    sessions: int
    reserved: int
    capacity: int
    pods: int
    draining: int


class GatewayStats(BaseModel):
    """A gateway's `GET /live/stats`: its pools' load, summed and per pool."""

    sessions: int
    reserved: int
    max_sessions: int
    pods: int
    relayed: int
    sockets: int
    pools: dict[str, PoolStats]


class Drained(BaseModel):
    """`/drain`'s answer, once every session ended or the deadline passed."""

    drained: Literal[True]
    ended_at_deadline: int
    """Sessions still running at the deadline, ended then."""


class Imported(BaseModel):
    """`POST /live/handover` and `/live/handover/resume`: the blob or record is held for the socket
    that continues it (`X-Liveplex-Import`)."""

    import_id: str
    frames: int
    voice: str


async def invalid_request(request: Request, exc: Exception) -> Response:
    """FastAPI's validation failure (a query parameter of the wrong type or out of range) as a 400
    in OpenAI's shape, its `param` the parameter, as every other refusal names it."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    param = ".".join(str(part) for part in first["loc"][1:]) or None
    return replies.response(replies.openai_error(400, "invalid_value", f"{param}: {first['msg']}", param))
