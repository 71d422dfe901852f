"""GPT-Live events as frozen dataclasses; `parse` and `dump` are the only places JSON meets them.

`parse(text)` runs steps 1–5 of gpt-live §4.4 on one client frame: JSON object, `event_id`, `type`,
known/refused type, then a strict structural check of the payload (unknown fields at any depth,
required fields, JSON types, schema values, values liveplex cannot honour). It returns a client
event or an `Invalid` carrying the catalogue error and the `event_id` to echo. Checks that need the
server's configuration (model allow-list, voices, instruction length) happen in `Connection`.

`dump(event)` serialises any event with `type` first (the gateway's relay relies on it). Audio
deltas, the hot path, skip the JSON library.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, final

import orjson

from liveplex.gptlive import errors
from liveplex.gptlive.errors import Path, ProtocolError

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest WebSocket message either side accepts (gpt-live §2.1): above the SDK's 2 MiB, below a
memory hazard."""
MAX_EVENT_ID_CHARS = 512
"""Longest client `event_id`: it is echoed (twice in an `error`), so a longer one is refused
(`string_above_max_length`, param `event_id`) and never repeated."""
MAX_SERVER_MESSAGE_BYTES = MAX_MESSAGE_BYTES + 64 * 1024
"""Largest message a liveplex server writes: one event repeats at most one client message's
strings (`session.started` its instructions, delegation config and safety identifier, in no
more bytes than the client spent on them),
plus bounded fields of its own (ids, a capped `event_id`, errors that echo at most
`errors.MAX_ECHO_CHARS` of any value). The gateway reads pods with this limit."""


def new_event_id() -> str:
    """`event_` + 16 random hex digits: unique on a socket, even with two emitters (gpt-live §7)."""
    return "event_" + os.urandom(8).hex()


def new_session_id() -> str:
    return "sess_" + os.urandom(8).hex()


SESSION_ID = re.compile(r"sess_[A-Za-z0-9]{1,64}")
"""A session id a server takes from outside (a gateway's header, a caller's re-attach): the form
`new_session_id` mints, any length a peer's may have."""


# --- shared shapes ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AudioFormat:
    """`session.audio.format`; `type` is `audio/pcm`, `audio/pcmu` or `audio/pcma`."""

    type: str
    rate: int


DEFAULT_FORMAT = AudioFormat("audio/pcm", 24_000)
"""gpt-live §5.3: an omitted format is native PCM at 24 kHz."""


@dataclass(frozen=True, slots=True)
class CustomVoice:
    """`{"id": X}`: a voice from the server's registry."""

    id: str


Voice = str | CustomVoice


@dataclass(frozen=True, slots=True)
class ClientDelegation:
    """`delegation: {"type": "client"}`: accepted as a no-op, echoed; the model never delegates."""

    acknowledgement_delay_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ResponsesDelegation:
    """`delegation: {"type": "responses", ...}`: recorded and echoed as sent; the model never
    delegates, and `start` says so in an `info` event (never a fake `session.delegation.created`)."""

    responses: dict[str, Any]
    """The `ResponsesDelegationConfig` as the client sent it (checked one level deep)."""
    acknowledgement_delay_ms: int | None = None


Delegation = ClientDelegation | ResponsesDelegation


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of `session.input`, the history a client starts with (a reconnect's so far)."""

    role: str
    """`developer`, `user` or `assistant`."""
    text: str


MAX_IDLE_TIMEOUT_S = 3600
"""`idle_timeout_s` above an hour is refused: a session that quiet for that long is better ended."""
DEFAULT_VAD_THRESHOLD = 0.5
"""`wake_policy.vad_threshold` when omitted (openai 3.63 `WakePolicy`)."""


def wake_bounds(vad_threshold: float, idle_timeout_s: int | None) -> tuple[str, str] | None:
    """Which of a wake's values is out of bounds and what it must be ((name, "must be ..."));
    None: both fit. The one owner of the bounds: the create's fields and `serve`'s flags."""
    if math.isnan(vad_threshold) or not 0.0 <= vad_threshold <= 1.0:
        return "vad_threshold", "a number from 0 to 1 inclusive"
    if idle_timeout_s is not None and not 1 <= idle_timeout_s <= MAX_IDLE_TIMEOUT_S:
        return "idle_timeout_s", f"whole seconds from 1 to {MAX_IDLE_TIMEOUT_S}"
    return None


@dataclass(frozen=True, slots=True)
class WakePolicy:
    """`wake_policy: {"type": "speech", "vad_threshold"}` of a media session (openai 3.63
    `MediaSessionConfig`): inference starts at the caller's first speech, and each later wake too."""

    vad_threshold: float = DEFAULT_VAD_THRESHOLD


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """The accepted parts of a `session.start` SessionConfig; no-op fields are dropped."""

    model: str
    instructions: str | None = None
    format: AudioFormat | None = None
    voice: Voice | None = None
    delegation: Delegation | None = None
    input: tuple[Turn, ...] = ()
    safety_identifier: str | None = None
    """The client's id for its end user: kept in the resource and the session's log line, never
    used for routing."""
    wake_policy: WakePolicy | None = None
    """A media session's (WebRTC's) only: parsed on every start, refused on a socket's by
    `start.check_start`, which knows the transport."""
    idle_timeout_s: int | None = None
    """As `wake_policy`: whole seconds of inactivity before inference pauses."""
    store: bool = False
    """`store: true`: keep the session's recording and resume record (docs/storage.md); parsed on
    every start, refused by `start.check_start` where nothing stores (a server without a store)."""


# --- client events ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SessionStart:
    session: SessionConfig
    event_id: str | None = None


@dataclass(slots=True)  # not frozen: four per 80 ms per session, and a frozen __init__ costs twice as much
class InputAudioAppend:
    audio: str
    """Base64 as sent; decoded and checked against the session format by `Connection`."""
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class InputAudioMute:
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class InputAudioUnmute:
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class SessionClose:
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class CommentaryAppend:
    """`session.commentary.append`: text the agent says (gpt-live §4.5)."""

    content: str
    event_id: str | None = None


ClientEvent = (SessionStart | InputAudioAppend | InputAudioMute | InputAudioUnmute | SessionClose
               | CommentaryAppend)

CLIENT_TYPES: dict[type, str] = {
    SessionStart: "session.start",
    InputAudioAppend: "session.input_audio.append",
    InputAudioMute: "session.input_audio.mute",
    InputAudioUnmute: "session.input_audio.unmute",
    SessionClose: "session.close",
    CommentaryAppend: "session.commentary.append",
}
"""gpt-live §4.2: the wire `type` of each client event liveplex handles. The one table: `parse`,
`dump` and `Connection`'s legality table all read it."""


@final  # `Connection.receive` tells it from the events by `type(e) is`
@dataclass(frozen=True, slots=True)
class Invalid:
    """A client frame refused by steps 1–5 of gpt-live §4.4."""

    error: ProtocolError
    event_id: str | None
    """The client's `event_id`, to echo as `client_event_id` (None when absent or unusable)."""
    type: str | None = None
    """The event type, when it was readable."""


# --- server events ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SessionResource:
    """The resolved session, sent in `session.started` and again, unchanged, in `session.closed`."""

    id: str
    expires_at: int
    """Unix seconds."""
    model: str
    instructions: str
    format: AudioFormat
    voice: Voice
    """As the client named it (or the default name)."""
    delegation: Delegation | None = None
    safety_identifier: str | None = None
    store: bool = False
    """Whether the session is stored (its recording downloadable: docs/storage.md)."""


@dataclass(frozen=True, slots=True)
class SessionStarted:
    session: SessionResource
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class OutputAudioDelta:
    delta: str
    """Base64 of one engine frame in the session format."""


@dataclass(frozen=True, slots=True)
class OutputTranscriptDelta:
    delta: str
    start_ms: int
    end_ms: int
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    seconds: float
    context_ratio: float | None = None
    """`context_window.usage_ratio`: the share of the model's window the session fills; None
    when the engine has no window to report (the field is then omitted)."""
    event_id: str = field(default_factory=new_event_id)
    paused_seconds: float | None = None
    """Of `seconds`, the time the session spent paused (docs/pause.md), for the SDK's
    `active_seconds` and `paused_seconds`; None: the session never pauses (no breakdown)."""


@dataclass(frozen=True, slots=True)
class SessionPaused:
    """The idle timeout took the session out of the engine's batch (docs/pause.md)."""

    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class SessionResumed:
    """Speech woke the session and it runs again."""

    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class CommentaryAppended:
    """The ack of `session.commentary.append`, at the timeline position it was accepted."""

    at_ms: int
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class InputAudioMuted:
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class InputAudioUnmuted:
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class SessionClosed:
    reason: str
    """`close_requested`, `expired` or `connection_lost`."""
    session: SessionResource
    seconds: float
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)
    paused_seconds: float | None = None
    """As `UsageUpdated.paused_seconds`."""


@dataclass(frozen=True, slots=True)
class Error:
    error: ProtocolError
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


@dataclass(frozen=True, slots=True)
class Info:
    code: str
    message: str
    client_event_id: str | None = None
    event_id: str = field(default_factory=new_event_id)


IdentifiedEvent = (SessionStarted | OutputTranscriptDelta | UsageUpdated | InputAudioMuted | InputAudioUnmuted
                   | SessionClosed | Error | Info | CommentaryAppended | SessionPaused | SessionResumed)
"""The server events with an `event_id`: all but the audio delta, the one event sent per frame."""
ServerEvent = IdentifiedEvent | OutputAudioDelta
Event = ClientEvent | ServerEvent


# --- dump ---------------------------------------------------------------------------------------------

SERVER_TYPES: dict[type, str] = {
    SessionStarted: "session.started",
    OutputAudioDelta: "session.output_audio.delta",
    OutputTranscriptDelta: "session.output_transcript.delta",
    UsageUpdated: "session.usage.updated",
    CommentaryAppended: "session.commentary.appended",
    InputAudioMuted: "session.input_audio.muted",
    InputAudioUnmuted: "session.input_audio.unmuted",
    SessionClosed: "session.closed",
    SessionPaused: "session.paused",
    SessionResumed: "session.resumed",
    Error: "error",
    Info: "info",
}
"""gpt-live §4.4: the wire `type` of each server event liveplex sends. The one table: `dump` writes
it, and the gateway and the bench, which read servers' events without parsing them all, compare
with it."""
AUDIO_DELTA_PREFIX = '{"type":"' + SERVER_TYPES[OutputAudioDelta] + '","delta":"'
"""How every audio delta liveplex writes begins (`dump`: `type` first, then `delta`), so a reader
finds the hot event by a prefix test, without parsing it."""


def _with_client_id(out: dict[str, Any], client_event_id: str | None) -> dict[str, Any]:
    if client_event_id is not None:
        out["client_event_id"] = client_event_id
    return out


def _format_json(fmt: AudioFormat) -> dict[str, Any]:
    return {"type": fmt.type, "rate": fmt.rate}


def _voice_json(voice: Voice) -> str | dict[str, str]:
    return {"id": voice.id} if isinstance(voice, CustomVoice) else voice


def _delegation_json(d: Delegation) -> dict[str, Any]:
    out: dict[str, Any]
    if isinstance(d, ResponsesDelegation):
        out = {"type": "responses", "responses": d.responses}
    else:
        out = {"type": "client"}
    if d.acknowledgement_delay_ms is not None:
        out["acknowledgement_delay_ms"] = d.acknowledgement_delay_ms
    return out


def resource_json(r: SessionResource) -> dict[str, Any]:
    """The session resource as `session.started` and `session.closed` carry it (and a stored
    session's settings, docs/storage.md)."""
    out: dict[str, Any] = {
        "id": r.id, "status": "active", "expires_at": r.expires_at, "model": r.model,
        "instructions": r.instructions,
        "audio": {"format": _format_json(r.format), "output": {"voice": _voice_json(r.voice)}},
    }
    if r.delegation is not None:
        out["delegation"] = _delegation_json(r.delegation)
    if r.safety_identifier is not None:
        out["safety_identifier"] = r.safety_identifier
    out["store"] = r.store
    return out


def _config_json(c: SessionConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"model": c.model}
    if c.instructions is not None:
        out["instructions"] = c.instructions
    audio: dict[str, Any] = {}
    if c.format is not None:
        audio["format"] = _format_json(c.format)
    if c.voice is not None:
        audio["output"] = {"voice": _voice_json(c.voice)}
    if audio:
        out["audio"] = audio
    if c.delegation is not None:
        out["delegation"] = _delegation_json(c.delegation)
    if c.input:
        out["input"] = [_turn_json(t) for t in c.input]
    if c.safety_identifier is not None:
        out["safety_identifier"] = c.safety_identifier
    if c.wake_policy is not None:
        out["wake_policy"] = {"type": "speech", "vad_threshold": c.wake_policy.vad_threshold}
    if c.idle_timeout_s is not None:
        out["idle_timeout_s"] = c.idle_timeout_s
    if c.store:
        out["store"] = True
    return out


def _turn_json(t: Turn) -> dict[str, Any]:
    part = "output_text" if t.role == "assistant" else "input_text"
    return {"type": "message", "role": t.role, "content": [{"type": part, "text": t.text}]}


def _server(event: IdentifiedEvent, **fields: Any) -> dict[str, Any]:
    """A server event's JSON object: `type` and `event_id` first, then `fields`, then the client's
    event id when the event answers one."""
    out = {"type": SERVER_TYPES[type(event)], "event_id": event.event_id, **fields}
    return _with_client_id(out, getattr(event, "client_event_id", None))


def _usage(seconds: float, paused: float | None) -> dict[str, Any]:
    """`usage`; with the breakdown (a session that may pause) every figure is whole seconds, as
    the SDK's `SessionUsage` says: paused rounded down, active the rest of the whole total."""
    if paused is None:
        return {"seconds": seconds}
    total, off = int(seconds), int(paused)
    return {"seconds": total, "active_seconds": total - off, "paused_seconds": off}


def _usage_json(e: UsageUpdated) -> dict[str, Any]:
    out = _server(e, usage=_usage(e.seconds, e.paused_seconds))
    if e.context_ratio is not None:
        out["context_window"] = {"usage_ratio": e.context_ratio}
    return out


def _client(event: ClientEvent, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": CLIENT_TYPES[type(event)]}
    if event.event_id is not None:
        out["event_id"] = event.event_id
    out.update(fields)
    return out


def _error_json(e: Error) -> dict[str, Any]:
    err = e.error
    body: dict[str, Any] = {"type": err.error_type.value, "code": err.code.value,
                            "message": err.message, "param": err.param_text}
    _with_client_id(body, e.client_event_id)
    return _server(e, error=body)


_DUMPERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    SessionStart: lambda e: _client(e, session=_config_json(e.session)),
    InputAudioAppend: lambda e: _client(e, audio=e.audio),
    InputAudioMute: _client,
    InputAudioUnmute: _client,
    SessionClose: _client,
    SessionStarted: lambda e: _server(e, session=resource_json(e.session)),
    OutputTranscriptDelta: lambda e: _server(e, delta=e.delta, start_ms=e.start_ms, end_ms=e.end_ms),
    CommentaryAppend: lambda e: _client(e, content=e.content),
    UsageUpdated: _usage_json,
    CommentaryAppended: lambda e: _server(e, start_ms=e.at_ms, end_ms=e.at_ms),
    InputAudioMuted: _server,
    InputAudioUnmuted: _server,
    SessionClosed: lambda e: _server(e, reason=e.reason, session=resource_json(e.session),
                                     usage=_usage(e.seconds, e.paused_seconds)),
    SessionPaused: _server,
    SessionResumed: _server,
    Error: _error_json,
    Info: lambda e: _server(e, code=e.code, message=e.message),
}


def dump(event: Event) -> str:
    """The JSON text of `event`, `type` first; audio deltas are exactly `{type, delta}`."""
    if type(event) is OutputAudioDelta:  # one per session per tick: no dict, no JSON library
        return AUDIO_DELTA_PREFIX + event.delta + '"}'
    return orjson.dumps(_DUMPERS[type(event)](event)).decode()


# --- parse ----------------------------------------------------------------------------------------------

REFUSED: dict[str, str] = {
    "session.update": "Nothing about a running session can change.",
    "session.instructions.append": ("The role prompt is fixed at session start; this model's only "
                                    "text channel mid-session is what it says (session.commentary.append)."),
    "session.thinking.append": ("This model has no silent text context: any text it is given mid-session "
                                "is spoken (use session.commentary.append)."),
    "session.output_audio.fixture.play": "Audio fixtures are not implemented.",
    "decision.create": "This server has no Decisions backend.",
    "decision.item.create": "This server has no Decisions backend.",
    "decision.item.delete": "This server has no Decisions backend.",
    "response.item.create": "This server does not delegate to Responses.",
    "response.create": "This server does not delegate to Responses.",
    "transport.dtmf.send": "DTMF belongs to sideband and SIP connections only.",
}
"""gpt-live §4.3: valid GPT-Live client events refused by name, with the reason."""

_PCM_RATES = (16_000, 24_000)
_G711_RATE = 8_000
FORMAT_TYPES = ("audio/pcm", "audio/pcmu", "audio/pcma")


def _expect_object(value: object, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise errors.invalid_type(path, "an object", value)
    return value


def _expect_str(value: object, path: Path) -> str:
    if not isinstance(value, str):
        raise errors.invalid_type(path, "a string", value)
    return value


def _expect_int(value: object, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise errors.invalid_type(path, "an integer", value)
    return value


def _closed(obj: dict[str, Any], allowed: frozenset[str], path: Path) -> None:
    """Every level is closed (gpt-live §5.2): the first unknown key, in the client's order, wins."""
    if obj.keys() <= allowed:  # one C-level subset check for the events that are fine
        return
    for key in obj:
        if key not in allowed:
            raise errors.unknown_parameter((*path, key))


def _format(value: object, path: Path) -> AudioFormat:
    obj = _expect_object(value, path)
    _closed(obj, frozenset({"type", "rate"}), path)
    if "type" not in obj:
        raise errors.missing_required_parameter((*path, "type"))
    kind = _expect_str(obj["type"], (*path, "type"))
    if kind not in FORMAT_TYPES:
        raise errors.invalid_value((*path, "type"), kind, FORMAT_TYPES)
    if "rate" not in obj:
        raise errors.missing_required_parameter((*path, "rate"))
    rate = _expect_int(obj["rate"], (*path, "rate"))
    if kind == "audio/pcm" and rate not in _PCM_RATES:
        raise errors.invalid_value((*path, "rate"), rate, _PCM_RATES)
    if kind != "audio/pcm" and rate != _G711_RATE:
        raise errors.unsupported_value((*path, "rate"), rate, (_G711_RATE,))
    return AudioFormat(kind, rate)


def _voice(value: object, path: Path) -> Voice | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, dict):
        raise errors.invalid_type(path, "a string or an object", value)
    _closed(value, frozenset({"id"}), path)
    if "id" not in value:
        raise errors.missing_required_parameter((*path, "id"))
    return CustomVoice(_expect_str(value["id"], (*path, "id")))


def _audio(value: object, path: Path) -> tuple[AudioFormat | None, Voice | None]:
    if value is None:
        return None, None
    obj = _expect_object(value, path)
    _closed(obj, frozenset({"format", "output"}), path)
    fmt = None if obj.get("format") is None else _format(obj["format"], (*path, "format"))
    voice = None
    if obj.get("output") is not None:
        out_path = (*path, "output")
        output = _expect_object(obj["output"], out_path)
        _closed(output, frozenset({"voice"}), out_path)
        voice = _voice(output.get("voice"), (*out_path, "voice"))
    return fmt, voice


_DELEGATION_TYPES = ("client", "responses", "decisions")


_RESPONSES_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str,), "instructions": (str,), "max_output_tokens": (int,), "parallel_tool_calls": (bool,),
    "reasoning": (dict,), "service_tier": (str,), "text": (dict,), "tool_choice": (str, dict),
    "tools": (list,),
}
"""openai 3.57's `ResponsesDelegationConfig`: each field and the JSON types it may have (or null).
Checked one level deep: the config is only recorded, since the model never delegates."""
_JSON_NAMES = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object", list: "an array"}


def _responses(value: object, path: Path) -> dict[str, Any]:
    obj = _expect_object(value, path)
    _closed(obj, frozenset(_RESPONSES_FIELDS), path)
    if "model" not in obj:
        raise errors.missing_required_parameter((*path, "model"))
    for key, item in obj.items():
        kinds = _RESPONSES_FIELDS[key]
        ok = isinstance(item, kinds) and not (bool not in kinds and isinstance(item, bool))
        if not ok and not (item is None and key != "model"):
            raise errors.invalid_type((*path, key), " or ".join(_JSON_NAMES[k] for k in kinds), item)
    return obj


def _delegation(value: object, path: Path) -> Delegation | None:
    if value is None:
        return None
    obj = _expect_object(value, path)
    if "type" not in obj:
        raise errors.missing_required_parameter((*path, "type"))
    kind = _expect_str(obj["type"], (*path, "type"))
    if kind == "decisions":
        raise errors.unsupported_value((*path, "type"), kind, ("client", "responses"))
    if kind not in ("client", "responses"):
        raise errors.invalid_value((*path, "type"), kind, _DELEGATION_TYPES)
    responses = kind == "responses"
    _closed(obj, _RESPONSES_KEYS if responses else _CLIENT_KEYS, path)
    delay = obj.get("acknowledgement_delay_ms")
    if delay is not None:
        delay = _expect_int(delay, (*path, "acknowledgement_delay_ms"))
    if not responses:
        return ClientDelegation(delay)
    if "responses" not in obj:
        raise errors.missing_required_parameter((*path, "responses"))
    return ResponsesDelegation(_responses(obj["responses"], (*path, "responses")), delay)


_CLIENT_KEYS = frozenset({"type", "acknowledgement_delay_ms"})
_RESPONSES_KEYS = _CLIENT_KEYS | {"responses"}

MAX_SAFETY_IDENTIFIER_CHARS = 64
"""Longest `safety_identifier` (OpenAI's limit for it in the Responses API): it is echoed and logged."""

MAX_INPUT_ITEMS = 128
"""openai 3.57: `session.input` holds at most 128 messages."""
_ROLES = ("developer", "user", "assistant")
_ITEM_KEYS = frozenset({"type", "role", "content", "id", "status"})
_PART_KEYS = frozenset({"type", "text"})
_STATUSES = ("incomplete", "completed")


def _part_types(role: str) -> tuple[str, ...]:
    """The content part types the SDK allows a role (`type` itself may be omitted)."""
    return ("text", "output_text") if role == "assistant" else ("input_text",)


def _turn(value: object, path: Path) -> Turn:
    """One `InitialItem` (openai 3.57): a message with exactly one text part."""
    obj = _expect_object(value, path)
    _closed(obj, _ITEM_KEYS, path)
    if "role" not in obj:
        raise errors.missing_required_parameter((*path, "role"))
    role = _expect_str(obj["role"], (*path, "role"))
    if role not in _ROLES:
        raise errors.invalid_value((*path, "role"), role, _ROLES)
    kind = obj.get("type")
    if kind is not None and _expect_str(kind, (*path, "type")) != "message":
        raise errors.invalid_value((*path, "type"), kind, ("message",))
    if obj.get("id") is not None:
        _expect_str(obj["id"], (*path, "id"))
    status = obj.get("status")
    if status is not None and _expect_str(status, (*path, "status")) not in _STATUSES:
        raise errors.invalid_value((*path, "status"), status, _STATUSES)
    if "content" not in obj:
        raise errors.missing_required_parameter((*path, "content"))
    content_path = (*path, "content")
    content = obj["content"]
    if not isinstance(content, list):
        raise errors.invalid_type(content_path, "an array", content)
    if len(content) != 1:
        raise errors.invalid_value(content_path, f"{len(content)} parts", ("exactly one text part",))
    part_path = (*content_path, 0)
    part = _expect_object(content[0], part_path)
    _closed(part, _PART_KEYS, part_path)
    allowed = _part_types(role)
    part_type = part.get("type")
    if part_type is not None and _expect_str(part_type, (*part_path, "type")) not in allowed:
        raise errors.invalid_value((*part_path, "type"), part_type, allowed)
    if "text" not in part:
        raise errors.missing_required_parameter((*part_path, "text"))
    return Turn(role, _expect_str(part["text"], (*part_path, "text")))


def _input(value: object, path: Path) -> tuple[Turn, ...]:
    """`session.input`: the startup history, checked strictly, each error naming the item."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise errors.invalid_type(path, "an array", value)
    if len(value) > MAX_INPUT_ITEMS:
        raise errors.array_above_max_length(path, len(value), MAX_INPUT_ITEMS)
    return tuple(_turn(item, (*path, i)) for i, item in enumerate(value))


def _empty_list(value: object, path: Path) -> None:
    """`triggers`: omitted, null or [] are no-ops; anything else cannot be honoured."""
    if value is None:
        return
    if not isinstance(value, list):
        raise errors.invalid_type(path, "an array", value)
    if value:
        raise errors.unsupported_parameter(path)


_WAKE_KEYS = frozenset({"type", "vad_threshold"})


def _wake_policy(value: object, path: Path) -> WakePolicy:
    """`{"type": "speech", "vad_threshold": 0..1}` (openai 3.63 `WakePolicy`)."""
    obj = _expect_object(value, path)
    _closed(obj, _WAKE_KEYS, path)
    if "type" not in obj:
        raise errors.missing_required_parameter((*path, "type"))
    kind = _expect_str(obj["type"], (*path, "type"))
    if kind != "speech":
        raise errors.invalid_value((*path, "type"), kind, ("speech",))
    if "vad_threshold" not in obj:
        return WakePolicy()
    here = (*path, "vad_threshold")
    threshold = obj["vad_threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise errors.invalid_type(here, "a number", threshold)
    bad = wake_bounds(float(threshold), None)
    if bad is not None:
        raise errors.invalid_value(here, threshold, (bad[1],))
    return WakePolicy(float(threshold))


def _idle_timeout(value: object, path: Path) -> int:
    seconds = _expect_int(value, path)
    bad = wake_bounds(DEFAULT_VAD_THRESHOLD, seconds)
    if bad is not None:
        raise errors.invalid_value(path, seconds, (bad[1],))
    return seconds


def _session(value: object) -> SessionConfig:
    path: Path = ("session",)
    obj = _expect_object(value, path)
    model: str | None = None
    instructions: str | None = None
    fmt: AudioFormat | None = None
    voice: Voice | None = None
    delegation: Delegation | None = None
    turns: tuple[Turn, ...] = ()
    safety_identifier: str | None = None
    wake_policy: WakePolicy | None = None
    idle_timeout_s: int | None = None
    store = False
    for key, item in obj.items():  # client order: the first offending field wins
        here = (*path, key)
        if key == "model":
            model = _expect_str(item, here)
        elif key == "instructions":
            instructions = None if item is None else _expect_str(item, here)
        elif key == "audio":
            fmt, voice = _audio(item, here)
        elif key == "delegation":
            delegation = _delegation(item, here)
        elif key == "input":
            turns = _input(item, here)
        elif key == "triggers":
            _empty_list(item, here)
        elif key == "safety_identifier":
            safety_identifier = None if item is None else _expect_str(item, here)
            if safety_identifier is not None and len(safety_identifier) > MAX_SAFETY_IDENTIFIER_CHARS:
                raise errors.string_above_max_length(here, len(safety_identifier), MAX_SAFETY_IDENTIFIER_CHARS)
        elif key == "store":
            if item is not None and not isinstance(item, bool):
                raise errors.invalid_type(here, "a boolean", item)
            store = bool(item)
        elif key == "client":  # configures WebRTC: no value can be honoured here
            raise errors.unsupported_parameter(here)
        elif key == "wake_policy":
            wake_policy = _wake_policy(item, here)
        elif key == "idle_timeout_s":
            idle_timeout_s = _idle_timeout(item, here)
        else:
            raise errors.unknown_parameter(here)
    if model is None:
        raise errors.missing_required_parameter((*path, "model"))
    return SessionConfig(model, instructions, fmt, voice, delegation, turns, safety_identifier,
                         wake_policy, idle_timeout_s, store)


_ENVELOPE = frozenset({"type", "event_id"})
_START_KEYS = _ENVELOPE | {"session"}
_APPEND_KEYS = _ENVELOPE | {"audio"}
_COMMENTARY_KEYS = _ENVELOPE | {"content", "delegation_id"}

MAX_COMMENTARY_CHARS = 2_000
"""`session.commentary.append`'s `content` limit in code points: the SDK allows 500 tokens, about
4 characters each."""


def _start(obj: dict[str, Any], event_id: str | None) -> SessionStart:
    _closed(obj, _START_KEYS, ())
    if "session" not in obj:
        raise errors.missing_required_parameter(("session",))
    return SessionStart(_session(obj["session"]), event_id)


def _append(obj: dict[str, Any], event_id: str | None) -> InputAudioAppend:
    _closed(obj, _APPEND_KEYS, ())
    if "audio" not in obj:
        raise errors.missing_required_parameter(("audio",))
    return InputAudioAppend(_expect_str(obj["audio"], ("audio",)), event_id)


def _commentary(obj: dict[str, Any], event_id: str | None) -> CommentaryAppend:
    """The text to say; `delegation_id` must be null, since this server never delegates."""
    _closed(obj, _COMMENTARY_KEYS, ())
    if "content" not in obj:
        raise errors.missing_required_parameter(("content",))
    content = _expect_str(obj["content"], ("content",))
    if not content.strip():
        raise errors.invalid_value(("content",), content, ("a non-empty text",))
    if len(content) > MAX_COMMENTARY_CHARS:
        raise errors.string_above_max_length(("content",), len(content), MAX_COMMENTARY_CHARS)
    delegation_id = obj.get("delegation_id")
    if delegation_id is not None:
        _expect_str(delegation_id, ("delegation_id",))
        raise errors.invalid_value(("delegation_id",), delegation_id, ("null: this server never delegates",))
    return CommentaryAppend(content, event_id)


def _bare(make: Callable[[str | None], ClientEvent]) -> Callable[[dict[str, Any], str | None],
                                                                  ClientEvent]:
    def parse_bare(obj: dict[str, Any], event_id: str | None) -> ClientEvent:
        _closed(obj, _ENVELOPE, ())
        return make(event_id)
    return parse_bare


_PARSERS: dict[str, Callable[[dict[str, Any], str | None], ClientEvent]] = {
    CLIENT_TYPES[kind]: parser for kind, parser in (
        (SessionStart, _start), (InputAudioAppend, _append), (InputAudioMute, _bare(InputAudioMute)),
        (InputAudioUnmute, _bare(InputAudioUnmute)), (SessionClose, _bare(SessionClose)),
        (CommentaryAppend, _commentary))
}
SUPPORTED = tuple(_PARSERS)
"""gpt-live §4.2: the client events liveplex handles."""


def parse(data: str | bytes) -> ClientEvent | Invalid:
    """One client frame -> a client event, or the first failing step of gpt-live §4.4 (1–5).

    A binary frame arrives as `bytes` and is always `invalid_json` (step 1).
    """
    if isinstance(data, bytes):
        return Invalid(errors.invalid_json("binary frames are not accepted"), None)
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Invalid(errors.invalid_json("not valid JSON"), None)
    if not isinstance(obj, dict):
        return Invalid(errors.invalid_json("expected an object"), None)
    event_id = obj.get("event_id")
    if event_id is not None and not isinstance(event_id, str):
        return Invalid(errors.invalid_type(("event_id",), "a string", event_id), None)
    if event_id is not None and len(event_id) > MAX_EVENT_ID_CHARS:
        return Invalid(errors.string_above_max_length(("event_id",), len(event_id), MAX_EVENT_ID_CHARS), None)
    if "type" not in obj:
        return Invalid(errors.missing_required_parameter(("type",)), event_id)
    kind = obj["type"]
    if not isinstance(kind, str):
        return Invalid(errors.invalid_type(("type",), "a string", kind), event_id)
    parser = _PARSERS.get(kind)
    if parser is None:
        why = REFUSED.get(kind)
        error = errors.unknown_event(kind) if why is None else errors.unsupported_event(kind, why)
        return Invalid(error, event_id, kind)
    try:
        return parser(obj, event_id)
    except ProtocolError as error:
        return Invalid(error, event_id, kind)


def type_of(event: ClientEvent) -> str:
    """The wire `type` of a client event."""
    return CLIENT_TYPES[type(event)]
