"""Strict validation of the frames one socket receives: the SDK schema plus liveplex's own rules.

Pure: a `FrameValidator` is fed each raw frame of one WebSocket, in arrival order, and returns a
`Verdict` (the parsed event and the problems found). It keeps the little state the per-socket rules
need: the `event_id`s seen so far and where the socket is in the session's life.

Rules (gpt-live §7, §12.4, §14.20, §14.27, §14.38):

- text frames only, one JSON object each, without duplicate keys;
- `type` is the first key, a string, one of the SDK's server event types, and the event passes
  that type's closed schema (`schema.py`);
- `session.output_audio.delta` is exactly `{type, delta}`;
- `event_id` is non-empty, at most 256 bytes, unique on the socket;
- no `null` except `error.param`, which is always present; an `error` carries both
  `client_event_id` keys with the same value, or neither;
- events liveplex never emits (§7) are refused, as are `session.closed` reasons `content` and
  `remote_hangup`;
- nothing of a session (audio, transcript, usage, acks, info, `session.closed`) before
  `session.started`, one `session.started` per socket, and nothing at all after `session.closed`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

import jsonschema
import jsonschema.exceptions

from liveplex.conformance import schema

JsonObject = dict[str, object]

MAX_EVENT_ID_BYTES = 256
"""gpt-live §7: `event_` + random hex, at most 256 bytes."""

AUDIO_DELTA = "session.output_audio.delta"

NEVER_EMITTED = frozenset({
    "session.updated",
    "session.output_audio.fixture.playing",
    "session.output_audio.fixture.played",
    "session.instructions.appended",
    "session.thinking.appended",
    "session.input_transcript.delta",
    "session.delegation.created",
    "decision.event",
    "decision.item.created",
    "decision.item.deleted",
    "response.event",
    "session.input_audio.append",
    "transport.dtmf.received",
    "transport.dtmf.send",
    "transport.dtmf.sent",
    "transport.ringing",
    "transport.answered",
    "transport.failed",
})
"""Declared by the SDK but never sent by a liveplex server (gpt-live §7)."""

NEVER_REASONS = frozenset({"content", "remote_hangup"})
"""`session.closed` reasons liveplex never uses: no safety filter, no SIP (gpt-live §7)."""

SESSION_EVENTS = frozenset({
    AUDIO_DELTA,
    "session.output_transcript.delta",
    "session.usage.updated",
    "session.input_audio.muted",
    "session.input_audio.unmuted",
    "session.commentary.appended",
    "info",
    "session.closed",
})
"""Events that belong to a running session and so may not precede `session.started`."""


class Rule(enum.StrEnum):
    """The rule a problem breaks."""

    BINARY_FRAME = "binary_frame"
    NOT_JSON = "not_json"
    DUPLICATE_KEY = "duplicate_key"
    NOT_OBJECT = "not_object"
    MISSING_TYPE = "missing_type"
    TYPE_NOT_FIRST = "type_not_first"
    UNKNOWN_TYPE = "unknown_type"
    SCHEMA = "schema"
    AUDIO_FIELDS = "audio_fields"
    EVENT_ID = "event_id"
    DUPLICATE_EVENT_ID = "duplicate_event_id"
    NULL_VALUE = "null_value"
    ERROR_SHAPE = "error_shape"
    NEVER_EMITTED = "never_emitted"
    ORDER = "order"


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule: which, where (a dotted path from the event root, "" for the frame) and why."""

    rule: Rule
    path: str
    message: str

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"{self.rule}{where}: {self.message}"


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    """A validated frame: the parsed event (None when the frame is not a JSON object) and its problems."""

    event: JsonObject | None
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


class Phase(enum.Enum):
    """Where the socket is in the life of its (at most one) session."""

    IDLE = "idle"
    LIVE = "live"
    DONE = "done"


def dotted(path: Iterable[str | int]) -> str:
    """A param-style path: `("session", "input", 0, "content")` -> `session.input[0].content`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> JsonObject:
    obj: JsonObject = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


class _DuplicateKey(ValueError):
    pass


def parse(frame: str | bytes) -> tuple[JsonObject | None, tuple[Problem, ...]]:
    """The JSON object in a frame, or the framing problems (binary, not JSON, not an object)."""
    problems: list[Problem] = []
    if isinstance(frame, bytes):
        problems.append(Problem(Rule.BINARY_FRAME, "", "server events must be text frames"))
        try:
            frame = frame.decode()
        except UnicodeDecodeError:
            return None, (*problems, Problem(Rule.NOT_JSON, "", "binary frame is not UTF-8"))
    try:
        value = json.loads(frame, object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        return None, (*problems, Problem(Rule.DUPLICATE_KEY, "", f"duplicate key {exc}"))
    except ValueError as exc:
        return None, (*problems, Problem(Rule.NOT_JSON, "", f"not JSON: {exc}"))
    if not isinstance(value, dict):
        return None, (*problems, Problem(Rule.NOT_OBJECT, "", f"JSON {type(value).__name__}, not an object"))
    return value, tuple(problems)


def shape_problems(event: JsonObject) -> list[Problem]:
    """Stateless problems of one event: `type`, the SDK schema and liveplex's shape rules."""
    type_ = event.get("type")
    if "type" not in event:
        return [Problem(Rule.MISSING_TYPE, "type", "no `type` key")]
    if not isinstance(type_, str):
        return [Problem(Rule.MISSING_TYPE, "type", f"`type` is {json.dumps(type_)}, not a string")]
    problems: list[Problem] = []
    if next(iter(event)) != "type":
        problems.append(Problem(Rule.TYPE_NOT_FIRST, "type", f"first key is {next(iter(event))!r}"))
    if type_ not in schema.server_schemas():
        return [*problems, Problem(Rule.UNKNOWN_TYPE, "type", f"{type_!r} is not an SDK server event")]
    parsed = cast("Mapping[str, Any]", event)  # from json.loads: every value is JSON, as jsonschema's stubs ask
    error = jsonschema.exceptions.best_match(schema.validator(type_).iter_errors(parsed))
    if error is not None:
        problems.append(Problem(Rule.SCHEMA, dotted(error.absolute_path), error.message))
    if type_ in NEVER_EMITTED:
        problems.append(Problem(Rule.NEVER_EMITTED, "type", f"liveplex never emits {type_!r}"))
    if type_ == "session.closed" and event.get("reason") in NEVER_REASONS:
        problems.append(Problem(Rule.NEVER_EMITTED, "reason", f"reason {event['reason']!r} is never used"))
    if type_ == AUDIO_DELTA and set(event) != {"type", "delta"}:
        extra = sorted(set(event) - {"type", "delta"})
        problems.append(Problem(Rule.AUDIO_FIELDS, "", f"audio delta must be exactly {{type, delta}}, has {extra}"))
    problems += _null_problems(event, ())
    if type_ == "error":
        problems += _error_problems(event)
    return problems


def _null_problems(node: object, path: tuple[str | int, ...]) -> list[Problem]:
    # gpt-live §7: optional fields that do not apply are omitted, except `error.param`.
    if node is None and path != ("error", "param"):
        return [Problem(Rule.NULL_VALUE, dotted(path), "null where the field should be omitted")]
    if isinstance(node, dict):
        return [p for key, value in node.items() for p in _null_problems(value, (*path, key))]
    if isinstance(node, list):
        return [p for i, value in enumerate(node) for p in _null_problems(value, (*path, i))]
    return []


def _error_problems(event: JsonObject) -> list[Problem]:
    # gpt-live §8.1: `param` always present; both client_event_id keys or neither, equal.
    body = event.get("error")
    if not isinstance(body, dict):
        return []
    problems = []
    if "param" not in body:
        problems.append(Problem(Rule.ERROR_SHAPE, "error.param", "`error.param` must be present (null if none)"))
    outer, inner = event.get("client_event_id"), body.get("client_event_id")
    if ("client_event_id" in event) != ("client_event_id" in body) or outer != inner:
        problems.append(Problem(
            Rule.ERROR_SHAPE, "error.client_event_id",
            f"client_event_id {outer!r} and error.client_event_id {inner!r} must both be set and equal, or both absent",
        ))
    return problems


class FrameValidator:
    """Validates the frames of one socket in arrival order (gpt-live §12.4)."""

    __slots__ = ("phase", "frames", "_event_ids")

    def __init__(self) -> None:
        self.phase = Phase.IDLE
        self.frames = 0
        """Frames validated so far."""
        self._event_ids: set[str] = set()

    def check(self, frame: str | bytes) -> Verdict:
        """Validate the next frame received on the socket."""
        self.frames += 1
        event, framing = parse(frame)
        if event is None:
            return Verdict(None, framing)
        problems = [*framing, *shape_problems(event)]
        problems += self._event_id_problems(event)
        problems += self._order_problems(event)
        return Verdict(event, tuple(problems))

    def _event_id_problems(self, event: JsonObject) -> list[Problem]:
        event_id = event.get("event_id")
        if not isinstance(event_id, str):
            return []
        if not event_id or len(event_id.encode()) > MAX_EVENT_ID_BYTES:
            return [Problem(Rule.EVENT_ID, "event_id", f"event_id must be 1..{MAX_EVENT_ID_BYTES} bytes")]
        if event_id in self._event_ids:
            return [Problem(Rule.DUPLICATE_EVENT_ID, "event_id", f"event_id {event_id!r} repeats on this socket")]
        self._event_ids.add(event_id)
        return []

    def _order_problems(self, event: JsonObject) -> list[Problem]:
        type_ = event.get("type")
        if self.phase is Phase.DONE:
            return [Problem(Rule.ORDER, "type", f"{type_!r} after session.closed")]
        if type_ == "session.started":
            if self.phase is Phase.LIVE:
                return [Problem(Rule.ORDER, "type", "a second session.started on the socket")]
            self.phase = Phase.LIVE
        elif type_ == "session.closed":
            was_idle = self.phase is Phase.IDLE
            self.phase = Phase.DONE
            if was_idle:
                return [Problem(Rule.ORDER, "type", "session.closed before session.started")]
        elif type_ in SESSION_EVENTS and self.phase is Phase.IDLE:
            return [Problem(Rule.ORDER, "type", f"{type_!r} before session.started")]
        return []
