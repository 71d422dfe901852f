"""What crosses the gateway-to-pod hop besides GPT-Live itself (platform §7.4, docs/continuity.md),
written once: the upstream upgrade's headers, the handover routes, and the pod's private words to
the gateway on a relayed session's socket, each encoded and decoded here (`MOVE_REQUEST`,
`checkpoint_event` and `checkpoint_data`).
"""

from __future__ import annotations

import base64
from binascii import a2b_base64

SESSION_ID_HEADER = "X-Liveplex-Session-Id"
"""The id the gateway placed the session under; the pod starts the session with it, so the
reservation placement made is the one the session settles (matched case-insensitively)."""
POOL_HEADER = "X-Liveplex-Pool"
"""The pool the session was placed in, for the pod's logs."""
IMPORT_HEADER = "X-Liveplex-Import"
"""On an upstream upgrade: the import (a blob the pod holds) the session continues from."""
FRAMES_HEADER = "X-Liveplex-Frames"
"""On an export's answer: frames the session ran (the number of its next frame)."""
READ_HEADER = "X-Liveplex-Read"
"""On an export's answer: the messages of the session's socket the blob holds (the pod reads no
more into the session once it exports): the gateway sends the next pod those it sent after them."""

EXPORT_PATH = "/live/handover/{session_id}"
"""POST: export the session at the next tick boundary; answers its blob. `?after=N`: only once the
pod has read the session socket's first N messages (`EXPORT_AFTER`), so that every frame the
gateway forwarded before it asked is in the blob; those it forwards while the export runs are in
it up to `READ_HEADER`, and the rest go to the next pod."""
EXPORT_AFTER = "after"
"""The export's query parameter: messages the gateway had sent on the session's socket."""
EXPORT_CATCH_UP_S = 1.0
"""How long a pod waits for those messages before exporting anyway (they are then lost)."""
IMPORT_PATH = "/live/handover"
"""POST a blob: the pod checks and holds it; answers `{"import_id", "frames", "voice"}`."""
RESUME_PATH = "/live/handover/resume"
"""POST a resume record (a lost session's checkpoints, concatenated): held like an import."""

REATTACH_HEADER = "X-Liveplex-Reattach"
"""On an upstream upgrade with `SESSION_ID_HEADER` and no `session.start` to follow: continue that
session on this socket (a caller back through another gateway, docs/continuity.md "Re-attach").
The pod runs it: parked since its socket dropped without the caller's end (`ENDS_SESSION_CLOSE`),
or still on another socket, which it closes with `TAKEN_OVER_CLOSE`. The value is the last server
`event_id` the caller saw, empty for none. A pod that does not run the session refuses the upgrade:
404 `session_not_found`. On the socket the pod then writes, in order: `REATTACHED`, one checkpoint
holding the session's whole resume record, the events the caller missed, and then the session as
before."""
REATTACHED = "liveplex.session.reattached"
"""A re-attached socket's first message, never relayed: `{"type", "frames", "expires_at",
"replayed"}`: the frames the session ran (what the caller's usage counts from), its `expires_at`
(as `session.started` said it), and how many missed events follow. The gateway rebuilds the rest of
the session's resource from the client's own `session.start` (`gateway.sessions`)."""
ENDS_SESSION_CLOSE = 1000
"""The close code with which a gateway's socket ends its session (the caller is gone for good);
any other end of a relayed session's socket, a dropped connection included, parks it for the grace
window, during which the caller may re-attach."""
TAKEN_OVER_CLOSE = 4409
"""A relayed session's socket closed by its pod because the session was re-attached elsewhere: not
an error, no `session.closed`; a gateway closes its caller's socket with it too."""
SILENT_CLOSE = 4408
"""A relayed session's socket closed by its pod because its gateway stopped answering pings (a
wedged gateway: up, its socket open, relaying nothing): the session is parked as for a dropped
socket. A gateway that comes back and reads it closes its caller with 1012, to reconnect and
re-attach, and keeps the session's record."""
PING_INTERVAL_S = 1.0
"""How often a pod pings each socket a gateway opened (`SESSION_ID_HEADER`); its clients' keep
the server's `ws_ping_interval_s`."""
PING_TIMEOUT_S = 2.0
"""A pong later than this after its ping: the gateway is wedged, the session parked
(`SILENT_CLOSE`). A gateway's loop answers pings within milliseconds while it relays a frame
every 80 ms, so two seconds is a stop, not a busy moment. The bound from the wedge to the park is
`PING_INTERVAL_S + PING_TIMEOUT_S`, well inside the grace window and before the frames held for
the silent socket (`outbound_max_frames`, about 5 s) drop it as slow."""

OUT_BEAT = '{"type":"liveplex.session.out"}'
"""What a pod writes on a relayed session's socket every `OUT_BEAT_S` while the session is out of
the engine (paused, or a call waiting for its caller's first speech: docs/pause.md), when no tick
sends it an audio delta: the gateway's watchdog hears that the pod lives (its loop does; a wedged
engine is found at the wake, whose frames then stop). Gateways never relay it (matched whole)."""
OUT_BEAT_S = 0.2
"""A fifth of the gateway's default `--upstream-silence-ms` (1 s)."""

HANDED_OVER_CLOSE = 4100
"""A relayed session's socket closed by its pod after an export: not an error, no `session.closed`."""
MOVE_REQUESTED = "liveplex.session.move_requested"
"""An event a draining pod writes on each relayed session's socket: move this session elsewhere.
Gateways act on it and never relay it; a pod writes it only on sockets a gateway opened (they
carry `SESSION_ID_HEADER`)."""
MOVE_REQUEST = '{"type":"' + MOVE_REQUESTED + '"}'
"""Its whole text."""
CHECKPOINT = "liveplex.session.checkpoint"
"""An event a pod writes on each relayed session's socket with what rebuilds the session if the
pod is lost (`data`: base64 of opaque, self-delimiting bytes). Gateways keep every one of a session
in order, never relay them, and send their concatenation to `RESUME_PATH` of another pod."""
CHECKPOINT_PREFIX = '{"type":"' + CHECKPOINT + '","data":"'
"""How every checkpoint's text begins: gateways find them by this prefix, without parsing."""
MAX_RECORD_BYTES = 768 << 10
"""A session's kept checkpoints (decoded bytes) beyond which it is no longer resumable: a
PersonaPlex call writes about 71 KB a minute and its pod stops at 6,000 frames (~570 KB,
docs/continuity.md), so this bounds what a gateway holds per session whatever a pod sends, and
what a pod keeps of a relayed session's record for a caller's re-attach."""
_CHECKPOINT_END = '"}'
_CHECKPOINT_DATA = slice(len(CHECKPOINT_PREFIX), -len(_CHECKPOINT_END))


def reattached_event(frames: int, expires_at: int, replayed: int) -> str:
    """The `REATTACHED` event's text."""
    return '{"type":"' + REATTACHED + f'","frames":{frames},"expires_at":{expires_at},"replayed":{replayed}}}'


def checkpoint_event(data: bytes) -> str:
    """The `CHECKPOINT` event's text carrying `data` (written with the fields in this order, so
    that it starts with `CHECKPOINT_PREFIX`)."""
    return CHECKPOINT_PREFIX + base64.b64encode(data).decode() + _CHECKPOINT_END


def checkpoint_data(text: str) -> bytes:
    """The bytes a `CHECKPOINT` event carries (`text` starts with `CHECKPOINT_PREFIX`), decoded
    without parsing the JSON around them; ValueError when they are not as `checkpoint_event`
    writes them."""
    if not text.endswith(_CHECKPOINT_END):
        raise ValueError("a checkpoint event ends with its data")
    return a2b_base64(text[_CHECKPOINT_DATA], strict_mode=True)
