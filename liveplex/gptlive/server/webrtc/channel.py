"""The `oai-events` data channel of a WebRTC call, pure: which client messages the session's
machine reads, and which server events the channel carries.

The channel carries the WebSocket's events, read by the same `Connection` (the same checks and
errors), with three differences the call's POST made: `session.start` is refused (the POST
started the session), `session.input_audio.append` is refused (audio is RTP), and each direction
is limited by `session.client.data_channel` (`offer.Policy`). Everything else about a message,
valid or not, is the machine's to answer.
"""

from __future__ import annotations

import orjson

from liveplex.gptlive import errors, events
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server.webrtc.offer import Policy

_APPEND = events.CLIENT_TYPES[events.InputAudioAppend]
_START = events.CLIENT_TYPES[events.SessionStart]


def screen(data: str | bytes, policy: Policy) -> tuple[ProtocolError, str | None] | None:
    """Why the channel refuses a client message, with its `event_id` to echo; None: the session's
    machine reads it (and answers any other fault itself)."""
    if isinstance(data, bytes):
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    kind, event_id = obj.get("type"), obj.get("event_id")
    if not isinstance(kind, str) or (event_id is not None and not isinstance(event_id, str)) \
            or (event_id is not None and len(event_id) > events.MAX_EVENT_ID_CHARS):
        return None
    if kind == _START:
        return errors.start_on_webrtc(), event_id
    if kind == _APPEND:
        return errors.audio_on_webrtc(), event_id
    if not policy.takes(kind):
        return errors.event_not_allowed(kind), event_id
    return None


def server_type(text: str) -> str:
    """The `type` of a server event's text (an upstream's, relayed)."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return ""
    kind = obj.get("type") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else ""
