"""What `POST /v1/live/sessions` carries (the SDK's `LiveCreateParams`), read strictly and purely.

The body is `{"session": MediaSessionConfig, "transport": {"type": "webrtc", "sdp": OFFER}}`. The
session becomes the text of a `session.start` that the call's `Connection` reads like any other
(the same checks, the same errors and parameter paths), less what only WebRTC has:

- `client.data_channel`: which events may cross the data channel (`Policy`);
- `audio` holds only `output.voice`: WebRTC negotiates the format on the media transport, so the
  start asks for the engine's own (PCM at 24 kHz, the default);
- `wake_policy` and `idle_timeout_s` (openai 3.63) stay in the start: a media session's own,
  checked by `start.check_start` for a call (`Connection`'s `media`), and run by the pod's idle
  pause (docs/pause.md).

The offer is checked before anything is started: text that is SDP, an audio section that offers
Opus at 48 kHz, and a data channel section (the events' only way in and out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from liveplex.gptlive import errors, events
from liveplex.gptlive.errors import Path

MAX_BODY_BYTES = 256 * 1024
"""Largest request body read: a browser's offer is 3-8 KiB, the session at most what a
`session.start` may be."""
MAX_SDP_CHARS = 64 * 1024
"""Largest offer: a browser's, with many candidates, stays far below."""

CLIENT_EVENTS = frozenset(events.SUPPORTED) | frozenset(events.REFUSED)
"""Every GPT-Live client event type: what `allowed_client_events` may name."""

@dataclass(frozen=True, slots=True)
class Policy:
    """`session.client.data_channel`: the event types that may cross the data channel, each way;
    None allows every one (the SDK's "all", or the field omitted)."""

    client: frozenset[str] | None = None
    server: frozenset[str] | None = None

    def sends(self, server_type: str) -> bool:
        """Whether a server event of this type goes to the data channel."""
        return self.server is None or server_type in self.server

    def takes(self, client_type: str) -> bool:
        """Whether a client event of this type is read from the data channel."""
        return self.client is None or client_type in self.client


@dataclass(frozen=True, slots=True)
class Offer:
    """A WebRTC create request, read."""

    start_text: str
    """The `session.start` the call's `Connection` reads."""
    sdp: str
    policy: Policy
    client: dict[str, Any] | None = None
    """`session.client` as given (None: not given): kept with a stored call for its forks."""


def read(body: bytes) -> Offer:
    """The request body -> an `Offer`; raises the `ProtocolError` naming the first offender."""
    obj = _body(body)
    _closed(obj, ("session", "transport"), ())
    for key in ("session", "transport"):
        if key not in obj:
            raise errors.missing_required_parameter((key,))
    session, policy = _session(obj["session"])
    sdp = _transport(obj["transport"])
    return Offer(orjson.dumps({"type": "session.start", "session": session}).decode(), sdp, policy,
                 obj["session"].get("client"))


def read_fork(body: bytes) -> Offer:
    """A WebRTC fork's request body (`client.live.sessions.fork`: `transport`, and `session`, the
    overrides, optional) -> an `Offer` whose start carries the overrides (`gptlive.fork` merges
    them into the stored session's settings) and whose policy is `session.client`'s (omitted: every
    event type); raises the `ProtocolError` naming the first offender."""
    obj = _body(body)
    _closed(obj, ("session", "transport"), ())
    if "transport" not in obj:
        raise errors.missing_required_parameter(("transport",))
    session = _object(obj.get("session") or {}, ("session",))
    overrides = {key: item for key, item in session.items() if key != "client"}
    policy = policy_of(session["client"]) if "client" in session else Policy()
    sdp = _transport(obj["transport"])
    return Offer(orjson.dumps({"type": "session.start", "session": overrides}).decode(), sdp, policy,
                 session.get("client"))


def policy_of(client: object) -> Policy:
    """The data channel's policy a `session.client` gives (a create's, a fork's or a stored call's)."""
    return _client(client, ("session", "client"))


def _body(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_BODY_BYTES:
        raise errors.string_above_max_length(("body",), len(body), MAX_BODY_BYTES)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise errors.invalid_json("not valid JSON") from None
    if not isinstance(obj, dict):
        raise errors.invalid_json("expected an object")
    return obj


def _object(value: object, path: Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise errors.invalid_type(path, "an object", value)
    return value


def _closed(obj: dict[str, Any], allowed: tuple[str, ...], path: Path) -> None:
    for key in obj:
        if key not in allowed:
            raise errors.unknown_parameter((*path, key))


def _session(value: object) -> tuple[dict[str, Any], Policy]:
    """The session less WebRTC's own fields, and the data channel policy."""
    path: Path = ("session",)
    obj = _object(value, path)
    rest: dict[str, Any] = {}
    policy = Policy()
    for key, item in obj.items():  # client order: the first offending field wins
        here = (*path, key)
        if key == "client":
            policy = _client(item, here)
        elif key == "audio":
            audio = _object(item, here)
            _closed(audio, ("output",), here)
            if "output" in audio:
                _closed(_object(audio["output"], (*here, "output")), ("voice",), (*here, "output"))
            rest[key] = item
        else:
            rest[key] = item
    return rest, policy


def _client(value: object, path: Path) -> Policy:
    obj = _object(value, path)
    _closed(obj, ("data_channel",), path)
    if "data_channel" not in obj:
        return Policy()
    here = (*path, "data_channel")
    channel = _object(obj["data_channel"], here)
    _closed(channel, ("allowed_client_events", "allowed_server_events"), here)
    return Policy(_allowed(channel.get("allowed_client_events"), (*here, "allowed_client_events"), True),
                  _allowed(channel.get("allowed_server_events"), (*here, "allowed_server_events"), False))


def _allowed(value: object, path: Path, client: bool) -> frozenset[str] | None:
    """`"all"`, null or omitted (None: every type), or a list of event types; a server list may
    also hold `{"type": "response.event", ...}` selectors, which select nothing here (this
    server never delegates to Responses)."""
    if value is None or value == "all":
        return None
    if isinstance(value, str):
        raise errors.invalid_value(path, value, ("all", "an array of event types"))
    if not isinstance(value, list):
        raise errors.invalid_type(path, "'all' or an array", value)
    types: set[str] = set()
    for i, item in enumerate(value):
        here = (*path, i)
        if not client and isinstance(item, dict) and item.get("type") == "response.event":
            continue
        if not isinstance(item, str):
            raise errors.invalid_type(here, "a string", item)
        if client and item not in CLIENT_EVENTS:
            raise errors.invalid_value(here, item, sorted(CLIENT_EVENTS))
        types.add(item)
    return frozenset(types)


def _transport(value: object) -> str:
    path: Path = ("transport",)
    obj = _object(value, path)
    _closed(obj, ("type", "sdp"), path)
    for key in ("type", "sdp"):
        if key not in obj:
            raise errors.missing_required_parameter((*path, key))
    if obj["type"] != "webrtc":
        raise errors.unsupported_value((*path, "type"), obj["type"], ("webrtc",))
    sdp = obj["sdp"]
    if not isinstance(sdp, str):
        raise errors.invalid_type((*path, "sdp"), "a string", sdp)
    if len(sdp) > MAX_SDP_CHARS:
        raise errors.string_above_max_length((*path, "sdp"), len(sdp), MAX_SDP_CHARS)
    check_sdp(sdp)
    return sdp


def check_sdp(sdp: str) -> None:
    """What the offer must have for this server to answer it: SDP, an audio section offering
    Opus at 48 kHz, a data channel section. The rest (ICE credentials, the DTLS fingerprint) is
    checked by the WebRTC stack when it reads the offer."""
    lines = sdp.replace("\r\n", "\n").split("\n")
    if lines[0].strip() != "v=0":
        raise errors.invalid_sdp("not a session description (it must begin with 'v=0')")
    sections: list[list[str]] = []
    for line in lines:
        if line.startswith("m="):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
    audio = [s for s in sections if s[0].startswith("m=audio ")]
    if not audio:
        raise errors.invalid_sdp("the offer has no audio section (m=audio)")
    if not any(line.lower().startswith("a=rtpmap:") and " opus/48000" in line.lower()
               for section in audio for line in section):
        raise errors.invalid_sdp("the offer's audio has no codec this server speaks (it needs opus/48000)")
    if not any(s[0].startswith("m=application ") and "webrtc-datachannel" in s[0] for s in sections):
        raise errors.invalid_sdp("the offer has no data channel (m=application ... webrtc-datachannel); "
                                 "open the 'oai-events' channel before making the offer")


FEC_PARAMETER = "useinbandfec=1"
"""In an answer's Opus `fmtp` (RFC 7587): the answerer decodes in-band FEC, so the caller's encoder
adds to each packet the LBRR copy of the frame before it (Chrome does, at the cost of some bit
rate); a single lost packet is then recovered from the next (`opus.Decoder.conceal`). aiortc's
answer has no Opus `fmtp`."""


def _payload_type(line: str, attribute: str) -> str | None:
    """The payload type an `a=rtpmap:` or `a=fmtp:` line is about, if it is one."""
    prefix = f"a={attribute}:"
    return line[len(prefix):].split(" ", 1)[0] if line.lower().startswith(prefix) else None


def ask_fec(answer: str) -> str:
    """`answer` (SDP) with `FEC_PARAMETER` on each Opus payload type: added to its `a=fmtp` line,
    or a line of its own after its `a=rtpmap`."""
    newline = "\r\n" if "\r\n" in answer else "\n"
    lines = answer.split(newline)
    opus_types = {_payload_type(line, "rtpmap") for line in lines if " opus/48000" in line.lower()} - {None}
    with_fmtp = {_payload_type(line, "fmtp") for line in lines}
    out: list[str] = []
    for line in lines:
        if _payload_type(line, "fmtp") in opus_types and "useinbandfec" not in line:
            line += f";{FEC_PARAMETER}" if " " in line.strip() else f" {FEC_PARAMETER}"
        out.append(line)
        kind = _payload_type(line, "rtpmap")
        if kind in opus_types and kind not in with_fmtp:
            out.append(f"a=fmtp:{kind} {FEC_PARAMETER}")
    return newline.join(out)
