"""The GPT-Live error catalogue (gpt-live §8.2) as data: codes, their types, and message templates.

No other module writes error text. Validators raise `ProtocolError` values; only `Connection`
turns them into `error` events. A `param` is a tuple path inside (`("session", "audio", "format")`)
and is rendered only at the edge: names joined by dots, array indices as `[i]`
(`("session", "input", 0, "content")` -> `session.input[0].content`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

Path = tuple[str | int, ...]
"""A parameter path from the event root: field names, and indices into arrays."""

MAX_ECHO_CHARS = 64
"""Longest piece of a client's input an error repeats (a value, an event type, a parameter name):
the rest is elided, so no reply is much larger than its template and a client cannot make a
server (or the gateway relaying it) write megabytes back."""


class ErrorType(enum.Enum):
    """`error.type`: whose fault it was."""

    INVALID_REQUEST = "invalid_request_error"
    SERVER = "server_error"


class Code(enum.Enum):
    """`error.code` (gpt-live §8.2); all but `unknown_parameter` are liveplex decisions."""

    INVALID_JSON = "invalid_json"
    MISSING_REQUIRED_PARAMETER = "missing_required_parameter"
    INVALID_TYPE = "invalid_type"
    INVALID_VALUE = "invalid_value"
    UNKNOWN_PARAMETER = "unknown_parameter"
    UNSUPPORTED_PARAMETER = "unsupported_parameter"
    UNSUPPORTED_VALUE = "unsupported_value"
    STRING_ABOVE_MAX_LENGTH = "string_above_max_length"
    ARRAY_ABOVE_MAX_LENGTH = "array_above_max_length"
    MODEL_NOT_FOUND = "model_not_found"
    SESSION_NOT_FOUND = "session_not_found"
    UNSUPPORTED_EVENT = "unsupported_event"
    UNKNOWN_EVENT = "unknown_event"
    SESSION_NOT_STARTED = "session_not_started"
    SESSION_ALREADY_STARTED = "session_already_started"
    SESSION_CLOSING = "session_closing"
    SERVER_BUSY = "server_busy"
    SERVER_ERROR = "server_error"
    SERVER_SHUTDOWN = "server_shutdown"

    @property
    def error_type(self) -> ErrorType:
        return ErrorType.SERVER if self in _SERVER_CODES else ErrorType.INVALID_REQUEST


_SERVER_CODES = frozenset({Code.SERVER_BUSY, Code.SERVER_ERROR, Code.SERVER_SHUTDOWN})


def echo(value: object) -> str:
    """A client's value as an error repeats it: at most `MAX_ECHO_CHARS` characters of it."""
    text = str(value)
    if len(text) <= MAX_ECHO_CHARS:
        return text
    return f"{text[:MAX_ECHO_CHARS]}... ({len(text)} characters)"


def render_path(path: Path | None) -> str | None:
    """`("session", "input", 0, "role")` -> `"session.input[0].role"`; None stays None. A name
    the client chose (an unknown parameter) is echoed, so capped."""
    if path is None:
        return None
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{echo(part)}" if out else echo(part))
    return out


@dataclass(frozen=True)
class ProtocolError(Exception):
    """One refusal from the catalogue; raised by validators, rendered by `Connection` only."""

    code: Code
    param: Path | None
    """Path of the offending parameter; None when no parameter applies (`param: null`)."""
    message: str

    def __str__(self) -> str:
        return self.message

    @property
    def error_type(self) -> ErrorType:
        return self.code.error_type

    @property
    def param_text(self) -> str | None:
        return render_path(self.param)


_TYPE: Path = ("type",)


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for `invalid_type` messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _listing(values: Iterable[object]) -> str:
    return ", ".join(f"'{v}'" for v in values)


# --- constructors, one per template ---------------------------------------------------------------

def invalid_json(detail: str) -> ProtocolError:
    return ProtocolError(Code.INVALID_JSON, None,
                         f"The message could not be parsed as a JSON object: {detail}.")


def missing_required_parameter(path: Path) -> ProtocolError:
    return ProtocolError(Code.MISSING_REQUIRED_PARAMETER, path,
                         f"Missing required parameter: '{render_path(path)}'.")


def invalid_type(path: Path, expected: str, value: object) -> ProtocolError:
    return ProtocolError(
        Code.INVALID_TYPE, path,
        f"Invalid type for '{render_path(path)}': expected {expected}, "
        f"but got {_json_type(value)} instead.",
    )


def invalid_value(path: Path, value: object, supported: Iterable[object]) -> ProtocolError:
    return ProtocolError(Code.INVALID_VALUE, path,
                         f"Invalid value: '{echo(value)}'. Supported values are: {_listing(supported)}.")


def invalid_audio(reason: str) -> ProtocolError:
    """A bad `session.input_audio.append` chunk (gpt-live §6.1); the session continues."""
    return ProtocolError(Code.INVALID_VALUE, ("audio",), f"Invalid value for 'audio': {reason}.")


def unknown_parameter(path: Path) -> ProtocolError:
    return ProtocolError(Code.UNKNOWN_PARAMETER, path,
                         f"Unknown parameter: '{render_path(path)}'.")


def unsupported_parameter(path: Path) -> ProtocolError:
    return ProtocolError(Code.UNSUPPORTED_PARAMETER, path,
                         f"Unsupported parameter: '{render_path(path)}' is not supported by this "
                         "server.")


def unsupported_value(path: Path, value: object, supported: Iterable[object]) -> ProtocolError:
    return ProtocolError(
        Code.UNSUPPORTED_VALUE, path,
        f"Unsupported value: '{echo(value)}' for '{render_path(path)}'. "
        f"Supported values are: {_listing(supported)}.",
    )


def string_above_max_length(path: Path, length: int, limit: int) -> ProtocolError:
    return ProtocolError(
        Code.STRING_ABOVE_MAX_LENGTH, path,
        f"String too long for '{render_path(path)}': {length} characters, the maximum is {limit}.",
    )


def array_above_max_length(path: Path, length: int, limit: int) -> ProtocolError:
    return ProtocolError(
        Code.ARRAY_ABOVE_MAX_LENGTH, path,
        f"Array too long for '{render_path(path)}': {length} items, the maximum is {limit}.",
    )


def session_not_found(session_id: str) -> ProtocolError:
    """A re-attach (`?session_id=`) to no session this API key runs: unknown, ended, or another
    key's, told alike, so another key learns nothing of the call."""
    return ProtocolError(Code.SESSION_NOT_FOUND, ("session_id",),
                         f"No running session {echo(session_id)!r} for this API key to continue.")


def stored_session_not_found(session_id: str) -> ProtocolError:
    """A recording download (`GET /v1/live/sessions/{id}/content`) of no session stored for this
    API key: unknown, not stored, deleted, or another key's, told alike."""
    return ProtocolError(Code.SESSION_NOT_FOUND, ("session_id",),
                         f"No stored session {echo(session_id)!r} for this API key.")


def stored_session_starting(session_id: str) -> ProtocolError:
    """A fork of a stored session that has run no frame the store holds yet: nothing to continue."""
    return ProtocolError(Code.INVALID_VALUE, ("session_id",),
                         f"Invalid value for 'session_id': the stored session {echo(session_id)!r} is still "
                         "starting; nothing of it is stored yet to fork. Retry in a few seconds.")


def call_not_found(session_id: str) -> ProtocolError:
    """A hangup (`POST /v1/live/sessions/{id}/hangup`) of no live call of this API key: unknown,
    ended, or another key's, told alike."""
    return ProtocolError(Code.SESSION_NOT_FOUND, ("session_id",),
                         f"No live session {echo(session_id)!r} for this API key to hang up.")


def model_not_found(model: str, served: Iterable[str]) -> ProtocolError:
    return ProtocolError(
        Code.MODEL_NOT_FOUND, ("session", "model"),
        f"The model '{echo(model)}' does not exist on this server. Supported values are: "
        f"{_listing(served)}.",
    )


def unsupported_event(event_type: str, why: str) -> ProtocolError:
    return ProtocolError(Code.UNSUPPORTED_EVENT, _TYPE,
                         f"Unsupported event type: '{echo(event_type)}'. {why}")


def unknown_event(event_type: str) -> ProtocolError:
    return ProtocolError(Code.UNKNOWN_EVENT, _TYPE, f"Unknown event type: '{echo(event_type)}'.")


def session_not_started(event_type: str) -> ProtocolError:
    return ProtocolError(Code.SESSION_NOT_STARTED, _TYPE,
                         f"'{echo(event_type)}' needs a running session; send 'session.start' first.")


def session_already_started() -> ProtocolError:
    return ProtocolError(Code.SESSION_ALREADY_STARTED, _TYPE,
                         "A session is already running on this connection.")


def session_closing(event_type: str) -> ProtocolError:
    return ProtocolError(Code.SESSION_CLOSING, _TYPE,
                         f"'{echo(event_type)}' was sent after 'session.close'; the session is closing.")


def server_busy(max_sessions: int) -> ProtocolError:
    return ProtocolError(Code.SERVER_BUSY, None,
                         f"All {max_sessions} live sessions are in use; retry later.")


def no_engines() -> ProtocolError:
    """A gateway's pool has no engine ready (platform §7.3): busy, the client may retry."""
    return ProtocolError(Code.SERVER_BUSY, None, "No engine is ready to serve this model yet; retry later.")


def key_session_limit(limit: int) -> ProtocolError:
    """A gateway's per-key concurrent-session limit."""
    return ProtocolError(Code.SERVER_BUSY, None,
                         f"This API key already has {limit} live sessions, its limit; retry later.")


def key_start_rate(starts_per_s: float) -> ProtocolError:
    """A gateway's per-key start rate."""
    return ProtocolError(Code.SERVER_BUSY, None,
                         f"This API key started more than {starts_per_s:g} sessions a second, its limit; retry later.")


def no_engine_free() -> ProtocolError:
    """Every engine of the pool was tried and none could take the session (all excluded)."""
    return ProtocolError(Code.SERVER_BUSY, None, "No engine could take this session just now; retry later.")


def placement_unavailable() -> ProtocolError:
    """The gateway cannot reach its placement store and has no recent view of the pool."""
    return ProtocolError(Code.SERVER_BUSY, None,
                         "Sessions cannot be placed right now (the placement store is unreachable); retry later.")


def gateway_draining() -> ProtocolError:
    """A draining gateway takes no new session; the client's next connection reaches another."""
    return ProtocolError(Code.SERVER_BUSY, None,
                         "This gateway is shutting down; reconnect and another gateway will take the session.")


def not_honoured(path: Path, why: str) -> ProtocolError:
    """A valid GPT-Live parameter this server refuses by name, saying why (`why`: a sentence)."""
    return ProtocolError(Code.UNSUPPORTED_PARAMETER, path,
                         f"Unsupported parameter: '{render_path(path)}' is not supported by this server: {why}")


def store_unavailable() -> ProtocolError:
    """`session.store: true` where nothing keeps stored sessions (a pod serving clients itself, a
    gateway without a store): refused, so a client never believes a call is recorded when it is not."""
    return ProtocolError(Code.UNSUPPORTED_VALUE, ("session", "store"),
                         "Unsupported value: 'true' for 'session.store': this server keeps no stored sessions "
                         "(a gateway started with --store-dir or --store-s3-bucket does). Supported values are: false.")


def invalid_sdp(reason: str) -> ProtocolError:
    """A WebRTC offer (`transport.sdp` of `POST /v1/live/sessions`) this server cannot answer."""
    return ProtocolError(Code.INVALID_VALUE, ("transport", "sdp"), f"Invalid value for 'transport.sdp': {reason}.")


def _not_on_webrtc(event_type: str, why: str) -> ProtocolError:
    return ProtocolError(Code.UNSUPPORTED_EVENT, _TYPE,
                         f"Unsupported event type on a WebRTC call: '{echo(event_type)}'. {why}")


def start_on_webrtc() -> ProtocolError:
    """A WebRTC call is started by its `POST /v1/live/sessions`, never by an event."""
    return _not_on_webrtc("session.start", "This call was started by POST /v1/live/sessions; "
                          "its session.started was sent on the data channel.")


def audio_on_webrtc() -> ProtocolError:
    """A WebRTC call's caller audio travels as RTP only."""
    return _not_on_webrtc("session.input_audio.append", "A WebRTC call's audio travels as RTP (Opus).")


def event_not_allowed(event_type: str) -> ProtocolError:
    """A client event the call's `session.client.data_channel.allowed_client_events` leaves out."""
    return _not_on_webrtc(event_type, "session.client.data_channel.allowed_client_events does not allow it "
                          "on the data channel.")


def server_error(detail: str) -> ProtocolError:
    return ProtocolError(Code.SERVER_ERROR, None, f"The server had an internal error: {detail}.")


def server_shutdown() -> ProtocolError:
    return ProtocolError(Code.SERVER_SHUTDOWN, None,
                         "The server is shutting down; reconnect to start a new session.")
