"""A fork's start: a stored session's settings with the overrides GPT-Live allows (openai 3.63).

A fork (`client.live.forks.connect(session_id=...)` then `session.start`, or
`client.live.sessions.fork(id, transport={"type": "webrtc", ...}, session={...})`) is a new session
that continues a stored one's conversation: "the model, voice, frontend instructions, and prior
conversation come from the stored session". Its `session` is a `ForkSessionConfig` (a socket's)
or a `MediaSessionForkConfigParam` (a WebRTC call's), which may change only:

- `audio.format`: a socket's fork only ("WebRTC forks negotiate their audio format and must omit
  this field");
- `client`: a WebRTC fork only (its data channel; read by the call, `webrtc.offer`);
- `delegation`: only where the stored session already has Responses delegation, whose type cannot
  change;
- `store`: whether the fork is stored too (omitted: as the stored session was).

`start_text` turns a fork's `session.start` into the ordinary `session.start` the rest of the
server runs (the stored session's, with the overrides applied), so every check after it is the
start's own (`start.check_start`), with the same paths. Pure: no store, no socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from liveplex.gptlive import errors, events
from liveplex.gptlive.errors import Path, ProtocolError

MEDIA_ONLY = ("wake_policy", "idle_timeout_s")
"""A stored WebRTC session's fields a socket's start may not carry: a socket's fork leaves them."""
INHERITS_MODEL = "a fork inherits the stored session's model, voice, instructions and conversation."


@dataclass(frozen=True, slots=True)
class Source:
    """What a fork continues: the stored session's `session.start` settings (its resource as
    `session.started` gave it, less what named that one session: `gateway.forking.settings_of`),
    and the fork's transport."""

    session_id: str
    settings: dict[str, Any]
    webrtc: bool
    client: dict[str, Any] | None = None
    """The stored WebRTC call's `session.client` (its data channel's permissions), which a WebRTC
    fork that gives none inherits (`webrtc.offer.policy_of`); None: every event type."""


def _object(value: object, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise errors.invalid_type(path, "an object", value)
    return value


def merged(source: Source, overrides: object) -> dict[str, Any]:
    """The fork's session settings: the stored ones with `overrides` (a fork's `session`) applied;
    raises the `ProtocolError` naming the first offending override, in the client's order."""
    path: Path = ("session",)
    given = _object(overrides, path)
    out = {key: value for key, value in source.settings.items() if source.webrtc or key not in MEDIA_ONLY}
    for key, item in given.items():
        here = (*path, key)
        if key == "audio":
            if source.webrtc:  # negotiated by the peer connection
                raise errors.not_honoured(here, "a WebRTC fork negotiates its audio format.")
            audio = _object(item, here)
            for name in audio:
                if name != "format":
                    raise errors.unknown_parameter((*here, name))
            if "format" in audio:
                stored = _object(out.get("audio") or {}, here)
                out["audio"] = {**stored, "format": audio["format"]}
        elif key == "client":
            if not source.webrtc:
                raise errors.not_honoured(here, "a socket's fork has no data channel to configure.")
        elif key == "delegation":
            out["delegation"] = _delegation(out.get("delegation"), item, here)
        elif key == "store":
            if item is not None and not isinstance(item, bool):
                raise errors.invalid_type(here, "a boolean", item)
            if item is not None:
                out["store"] = item
        elif key == "model":
            raise errors.not_honoured(here, INHERITS_MODEL)
        else:
            raise errors.unknown_parameter(here)
    return out


def _delegation(stored: object, item: object, path: Path) -> dict[str, Any]:
    """The stored Responses delegation updated by `item` (its type unchanged)."""
    given = _object(item, path)
    if not isinstance(stored, dict) or stored.get("type") != "responses":
        raise errors.not_honoured(path, "only a stored session with Responses delegation may update it.")
    if "type" in given and given["type"] != "responses":
        raise errors.invalid_value((*path, "type"), given["type"], ("responses",))
    return {**stored, **given}


def start_text(source: Source, data: str | bytes) -> str | bytes | events.Invalid:
    """A fork socket's client frame as the server runs it: its `session.start` made the stored
    session's (`merged`), any other frame unchanged; a start this refuses is `events.Invalid`,
    answered as any refused start (the socket stays open for another)."""
    if isinstance(data, bytes):
        return data  # `events.parse` says why
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    if not isinstance(obj, dict) or obj.get("type") != events.CLIENT_TYPES[events.SessionStart]:
        return data
    event_id = obj.get("event_id")
    event_id = event_id if isinstance(event_id, str) else None
    if "session" not in obj:
        return events.Invalid(errors.missing_required_parameter(("session",)), event_id, "session.start")
    try:
        session = merged(source, obj["session"])
    except ProtocolError as error:
        return events.Invalid(error, event_id, "session.start")
    return orjson.dumps({**obj, "session": session}).decode()
