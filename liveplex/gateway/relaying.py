"""`Relaying`: what a relayed session's frames and its pod's end mean (platform §7.6-§7.9, issue 24),
as a sans-I/O machine.

One per session, from the pod's `session.started` on. The relay's shell (`relay.UpstreamLeg`) owns
the sockets, the tasks and the counters; it hands every input here and performs the `Command`s it
gets back, in order. `Relaying` reads no clock, knows no socket and awaits nothing, so every rule
below is tested directly (tests/gateway/test_relaying.py). It decides *which* end a session has;
how the client hears it (`server_error`, `session.closed`, the close code) is the pump's
`gptlive.server.passthrough.Passthrough`, reached through `EndClient` and `Lose`.

- **The pod's messages** (`upstream_message`): an audio delta (`events.AUDIO_DELTA_PREFIX`, a prefix
  test, no parse) is relayed as a frame (the pump counts it: the session's usage); a checkpoint
  (`hop.CHECKPOINT_PREFIX`, never relayed, never parsed: `hop.checkpoint_data`) is decoded into the session's record
  while it stays within `hop.MAX_RECORD_BYTES`, past which (or unreadable) the session is no longer
  resumable (`Forget`); the rare rest is parsed: `hop.MOVE_REQUESTED` asks to move the session
  (`StartMove`, never relayed), a paused session's `hop.OUT_BEAT` is swallowed (the watchdog
  counted it), `session.closed` is relayed and its reason kept; anything else is
  relayed verbatim. Except a moved or resumed session's answer to its replayed start: the pod it
  switched to answers the client's `session.start` as for a new session (`session.started`,
  swallowed by the move, then the start's `info` notes: `connection.START_ANSWER`), and the client
  heard all of it at its start; so until that pod's first message of another kind, those are
  swallowed too. A move is silent: the client sees no event for it.
- **The client's frames** (`client_frame`): forwarded to the pod while it reads (past
  `MAX_UPSTREAM_BUFFER_BYTES` unread, the pod is as stuck as a silent one: `Abort`, lost `silent`);
  held while the session is between pods (`moving.Moving.holding`), forwarded *and* held while the
  old pod exports (`moving.Moving.copying`: it says how many it read, the rest are the next pod's);
  held past `MAX_UPSTREAM_BUFFER_BYTES`, the session is lost (`not_taken`).
- **The pod's socket ends** (`upstream_gone`): after its `session.closed`, the client's socket ends
  with the pod's close code (`EndClient`); taken over (`hop.TAKEN_OVER_CLOSE`) or parked because
  this gateway went silent (`hop.SILENT_CLOSE`), the session goes on without it; while moving,
  it is the move's `old_closed`; otherwise the pod failed the session (a close handshake that did
  not end it counts as `VIOLATION`): if the pod is at fault (`upstream.Ending.pods_fault`) and a
  record was kept, the session *resumes* on another pod from it; else it is lost, the client told
  why (`LOST_BECAUSE`), the pod's breaker tripped only for the pod's own faults.
- **Moves and resumes** wrap `moving.Moving` (its rules are its own): `move` starts one for a
  running session that is not closing or moving already; the move's steps come back through
  `placed`, `rechecked`, `exported`, `imported`, `answered`, `unreachable`, each naming the
  `Moving` it answers for, so that I/O a finished move started changes nothing (a placement that
  lands late is given back: `Unreserve`). Its end becomes `Switch` (with the held frames),
  `Moved`, `Unreserve`, `Lose`, or a resume.

The hot paths allocate nothing: an audio delta answers the constant `RELAY_FRAME`, a client frame
that goes on to the pod `FORWARD`, a kept checkpoint or a held frame `NOTHING`; the shell tells
them by identity. Once the session is over (`Lose`, `EndClient`, or `end` when the client leaves),
every input answers `NOTHING`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from liveplex.gateway import moving, placing, upstream
from liveplex.gptlive import connection, errors, events
from liveplex.gptlive.server import hop, passthrough
from liveplex.placement import Busy, Placed

MAX_UPSTREAM_BUFFER_BYTES = 1 << 20
"""Client audio held for a pod that does not read, or for a session between pods (≈20 s of 24 kHz
PCM in base64), before the session is dropped."""
LOST_BECAUSE: dict[upstream.Ending, str] = {
    upstream.Ending.LOST: "the engine serving this session went away",
    upstream.Ending.VIOLATION: "the engine serving this session broke the protocol",
    upstream.Ending.SILENT: "the engine serving this session stopped responding",
    upstream.Ending.TOO_LARGE: "the engine's answer to an event of this session was too large to relay",
}
"""What the client's `server_error` says, by how the upstream ended."""
HELD_TOO_LONG = "the session's audio outgrew its buffer while it moved between engines"
TAKEN_OVER = "taken_over"
"""`EndClient.reason` of a socket whose session continued on another (the caller re-attached)."""
PARKED = "parked"
"""`EndClient.reason` of a socket whose pod parked its session because this gateway stopped
answering (`hop.SILENT_CLOSE`): the caller is closed 1012, to reconnect and re-attach."""
NOT_TAKEN = "not_taken"
"""`Lose.reason` for a session between pods that cannot arrive: exported off a draining pod and
no pod took it, or its held audio outgrew the buffer."""
LOST_REASONS: tuple[str, ...] = (*(ending.value for ending in upstream.Ending if ending in LOST_BECAUSE), NOT_TAKEN)
"""Every `Lose.reason` (the `sessions_lost` counter's labels)."""
MOVE_RESULTS: tuple[str, ...] = ("moved", "stayed", "lost", "resumed")
"""Every `Moved.result`: moved off a draining pod, stayed on it (no room elsewhere), lost on the
way, or resumed from its record after its pod was lost."""

_SESSION_CLOSED = events.SERVER_TYPES[events.SessionClosed]
_AUDIO_DELTA_PREFIX = events.AUDIO_DELTA_PREFIX
_CHECKPOINT_PREFIX = hop.CHECKPOINT_PREFIX
_OUT_BEAT = hop.OUT_BEAT
_START_ANSWER = frozenset(events.SERVER_TYPES[kind] for kind in connection.START_ANSWER)


@dataclass(frozen=True, slots=True)
class RelayFrame:
    """Relay the pod's message to the client verbatim, as an audio frame."""


@dataclass(frozen=True, slots=True)
class RelayEvent:
    """Relay one of the pod's rare events to the client verbatim (`text`, decoded)."""

    text: str


@dataclass(frozen=True, slots=True)
class Forward:
    """Send the client's frame on to the pod."""


@dataclass(frozen=True, slots=True)
class Abort:
    """The pod does not read the client's frames: drop its socket as `upstream.Ending.SILENT`."""


@dataclass(frozen=True, slots=True)
class Forget:
    """The session's record is dropped (`why`: "unreadable" or "over its bound", at
    `record_bytes`): the session can no longer be resumed."""

    why: str
    record_bytes: int


@dataclass(frozen=True, slots=True)
class StartMove:
    """The pod asked the session to move: answer with `move`, giving the pods the breakers exclude
    now (asked only then, not on the per-frame path)."""


@dataclass(frozen=True, slots=True)
class Blame:
    """The pod failed the session: trip its breaker."""

    pod: str


@dataclass(frozen=True, slots=True)
class Resuming:
    """The session resumes elsewhere from its record (`record_bytes`): its pod ended with `ending`.
    The move's commands follow."""

    pod: str
    ending: upstream.Ending
    record_bytes: int


@dataclass(frozen=True, slots=True)
class Unreserve:
    """Give back a slot placement reserved that no session will use."""

    placed: Placed


@dataclass(frozen=True, slots=True)
class Switch:
    """The target runs the session: relay from the socket dialled to `placed` (its answer to the
    replayed start swallowed: the client heard one), and send it `held`, the client's frames kept meanwhile, in
    order."""

    placed: Placed
    held: tuple[str | bytes, ...]


@dataclass(frozen=True, slots=True)
class Moved:
    """Count a move's end (one of `MOVE_RESULTS`)."""

    result: str


@dataclass(frozen=True, slots=True)
class EndClient:
    """The pod ended the session (its `session.closed` relayed): close the client's socket with
    `code`, the pod's own. `goes_on`: the session goes on without this gateway (taken over by
    another socket, or parked for its caller), so its record in Redis stays."""

    reason: str
    code: int
    goes_on: bool = False


@dataclass(frozen=True, slots=True)
class Lose:
    """The session cannot go on (platform §7.8): tell the client `why` (`server_error`,
    `session.closed` `connection_lost`, 1011), count it under `reason` (one of `LOST_REASONS`)."""

    why: str
    reason: str


Command = (RelayFrame | RelayEvent | Forward | Abort | Forget | StartMove | Blame | Resuming | Unreserve | Switch
           | Moved | EndClient | Lose
           | placing.Place | placing.Recheck | moving.Export | moving.Import | moving.DialTarget)
Commands = tuple[Command, ...]

NOTHING: Commands = ()
RELAY_FRAME: Commands = (RelayFrame(),)
FORWARD: Commands = (Forward(),)


class Relaying:
    """One relayed session; see the module docstring. `serving`: the pod that started it."""

    def __init__(self, serving: Placed) -> None:
        self.serving = serving
        """The pod the session runs on (after a `Switch`, the target)."""
        self.moving: moving.Moving | None = None
        """The move (or resume) under way."""
        self.ended = False
        self._closed_reason: str | None = None
        """The reason of the pod's `session.closed`, relayed: the session is closing."""
        self._record: bytearray | None = bytearray()
        """The pod's checkpoints of the session, decoded and concatenated in order (the resume
        record); None once over `hop.MAX_RECORD_BYTES` or unreadable."""
        self._answering_start = False
        """The pod the session switched to may still be answering the replayed `session.start`."""
        self._held: deque[str | bytes] = deque()
        self._held_bytes = 0
        """Client frames for a moving session's next pod (while the old pod exports, copies of
        those forwarded to it)."""

    @property
    def record(self) -> bytearray | None:
        """The resume record so far (the pod's checkpoints, decoded, in order): what a stored call
        keeps beside its recording; None once dropped (over its bound, or unreadable)."""
        return self._record

    @property
    def watched(self) -> bool:
        """Whether the pod's silence means it is stuck (`watchdog.Watched`): not while the session
        moves (its quiet is the move's, and each step has its own deadline) or once it is over."""
        return not self.ended and self.moving is None

    # --- the per-frame paths --------------------------------------------------------------------------

    def upstream_message(self, message: str | bytes) -> Commands:
        """One whole message from the pod."""
        if self.ended:
            return NOTHING
        if isinstance(message, str):
            if message.startswith(_AUDIO_DELTA_PREFIX):
                if self._answering_start:
                    self._answering_start = False
                return RELAY_FRAME
            if message.startswith(_CHECKPOINT_PREFIX):
                return self._keep(message)
            if message == _OUT_BEAT:  # heard (the watchdog counts it), never relayed
                return NOTHING
            text = message
        else:
            text = message.decode(errors="replace")
        kind, body = placing.event_kind(text)
        if self._answering_start:
            if kind in _START_ANSWER:
                return NOTHING
            self._answering_start = False
        if kind == hop.MOVE_REQUESTED:
            return (StartMove(),)
        if kind == _SESSION_CLOSED:
            self._closed_reason = str(body.get("reason"))
        return (RelayEvent(text),)

    def client_frame(self, data: str | bytes, unread_bytes: int) -> Commands:
        """One frame from the client; `unread_bytes`: what the pod's socket has not yet taken."""
        if self.ended:
            return NOTHING
        move = self.moving
        if move is not None and move.holding:
            return self._hold(data)
        if unread_bytes > MAX_UPSTREAM_BUFFER_BYTES:
            return (Abort(), *self._lose_to(upstream.Ending.SILENT))
        if move is not None and move.copying:
            held = self._hold(data)
            return FORWARD + held if held else FORWARD
        return FORWARD

    # --- the pod's end, and moves ---------------------------------------------------------------------

    def upstream_gone(self, ending: upstream.Ending | None, close_code: int | None,
                      tripped: frozenset[str]) -> Commands:
        """The pod's socket closed (`ending`: how, None read as `LOST`; `close_code`: its close
        frame's); `tripped`: the pods the breakers exclude now, should the session resume."""
        if self.ended:
            return NOTHING
        ending = ending or upstream.Ending.LOST
        if self._closed_reason is not None:
            self.ended = True
            code = close_code if ending is upstream.Ending.CLOSED and close_code else connection.NORMAL
            return (EndClient(self._closed_reason, code),)
        if ending is upstream.Ending.CLOSED and close_code == hop.TAKEN_OVER_CLOSE:
            self.ended = True  # its caller re-attached elsewhere: the session goes on there, not here
            return (EndClient(TAKEN_OVER, hop.TAKEN_OVER_CLOSE, goes_on=True),)
        if ending is upstream.Ending.CLOSED and close_code == hop.SILENT_CLOSE:
            self.ended = True  # this gateway was wedged: the pod parked the session for its caller
            return (EndClient(PARKED, passthrough.SERVICE_RESTART, goes_on=True),)
        if self.moving is not None:
            handed_over = ending is upstream.Ending.CLOSED and close_code == hop.HANDED_OVER_CLOSE
            return self._follow(self.moving.old_closed(handed_over), ending=ending, tripped=tripped)
        return self._failed(ending, tripped)

    def move(self, tripped: frozenset[str]) -> Commands:
        """Start the move `StartMove` asked for: once, for a running session that is not closing."""
        if self.ended or self.moving is not None or self._closed_reason is not None:
            return NOTHING
        self.moving = moving.Moving(self.serving.pod, tripped)
        return self._follow(self.moving.begin())

    def placed(self, move: moving.Moving, result: Placed | Busy | errors.ProtocolError) -> Commands:
        """Placement answered for `move`; one that landed after its move ended is given back."""
        command = move.placed(result) if self._current(move) else moving.Wait()
        if isinstance(command, moving.Wait):
            return (Unreserve(result),) if isinstance(result, Placed) else NOTHING
        return self._follow(command)

    def rechecked(self, move: moving.Moving) -> Commands:
        return self._follow(move.rechecked()) if self._current(move) else NOTHING

    def exported(self, move: moving.Moving, blob: bytes | None, after: int, read: int) -> Commands:
        """The old pod's answer to an export asked once `after` client messages were written to
        it: the blob and how many messages it read into it (those it read past `after` are no
        longer the next pod's), or None."""
        if not self._current(move):
            return NOTHING
        if blob is not None:
            for _ in range(min(max(read - after, 0), len(self._held))):
                self._held_bytes -= len(self._held.popleft())
        return self._follow(move.exported(blob))

    def imported(self, move: moving.Moving, target: Placed, import_id: str | None) -> Commands:
        """The target held the blob under `import_id`, or refused it (None: its slot is given
        back, the pod not blamed)."""
        unreserve = (Unreserve(target),) if import_id is None else NOTHING
        if not self._current(move):
            return unreserve
        return unreserve + self._follow(move.imported(target, import_id))

    def answered(self, move: moving.Moving, target: Placed, text: str) -> Commands:
        """The dialled target's first message; a `Switch` among the answer adopts its socket, else
        the shell closes it."""
        return self._follow(move.answered(target, text)) if self._current(move) else NOTHING

    def unreachable(self, move: moving.Moving, target: Placed) -> Commands:
        return self._follow(move.unreachable(target)) if self._current(move) else NOTHING

    def end(self) -> None:
        """The shell let go of the session (the client left, or it was lost or ended)."""
        self.ended = True
        self._drop_held()

    # --- internals -----------------------------------------------------------------------------------

    def _current(self, move: moving.Moving) -> bool:
        return move is self.moving and not self.ended

    def _keep(self, checkpoint: str) -> Commands:
        """One checkpoint, kept while the record is within bounds (decoded at once: bytes cost a
        third less than their base64, and no object each)."""
        record = self._record
        if record is None:
            return NOTHING
        try:
            record += hop.checkpoint_data(checkpoint)
        except ValueError:
            why = "unreadable"
        else:
            if len(record) <= hop.MAX_RECORD_BYTES:
                return NOTHING
            why = "over its bound"
        self._record = None
        return (Forget(why, len(record)),)

    def _hold(self, data: str | bytes) -> Commands:
        """Keep a client frame for the next pod, within the buffer's bound."""
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes <= MAX_UPSTREAM_BUFFER_BYTES:
            return NOTHING
        return (Moved("lost"), self._lose(HELD_TOO_LONG, NOT_TAKEN))

    def _drop_held(self) -> None:
        self._held.clear()
        self._held_bytes = 0

    def _failed(self, ending: upstream.Ending, tripped: frozenset[str]) -> Commands:
        """The pod's socket ended mid-session, not after a `session.closed`: resume from the record
        if the pod is at fault and a record was kept, else the session is lost."""
        if ending is upstream.Ending.CLOSED:  # a close handshake that did not end the session
            ending = upstream.Ending.VIOLATION
        record = self._record
        if not ending.pods_fault or not record:
            return self._lose_to(ending)
        pod = self.serving.pod
        self.moving = moving.Moving(pod, tripped, bytes(record))
        return (Blame(pod), Resuming(pod, ending, len(record)), *self._follow(self.moving.begin()))

    def _follow(self, command: moving.Command, *, ending: upstream.Ending = upstream.Ending.LOST,
                tripped: frozenset[str] = frozenset()) -> Commands:
        """The move's next step in the relay's terms. `ending` and `tripped` are `upstream_gone`'s:
        only `old_closed` reports the session died with its pod (`moving.Stranded(None)`), which then
        ends as any failure of the pod (`_failed`)."""
        if isinstance(command, moving.Wait):
            return NOTHING
        if isinstance(command, moving.Arrived):
            held = tuple(self._held)
            self._drop_held()
            resumed = self.moving is not None and self.moving.resuming
            self.moving = None
            self.serving = command.placed
            self._answering_start = True
            return (Switch(command.placed, held), Moved("resumed" if resumed else "moved"))
        if isinstance(command, moving.Stayed | moving.Stranded):
            self.moving = None
            self._drop_held()  # copies of frames the pod read: a move that did not happen holds none
            unreserve = NOTHING if command.unreserve is None else (Unreserve(command.unreserve),)
            if isinstance(command, moving.Stayed):
                return (*unreserve, Moved("stayed"))
            if command.why is not None:
                return (*unreserve, Moved("lost"), self._lose(command.why, NOT_TAKEN))
            ended = self._failed(ending, tripped)
            return (*unreserve, *ended) if self.moving is not None else (*unreserve, Moved("lost"), *ended)
        return (command,)

    def _lose_to(self, ending: upstream.Ending) -> Commands:
        """Lost as the pod's socket ended; its breaker trips only if the pod failed."""
        lose = self._lose(LOST_BECAUSE[ending], ending.value)
        return (Blame(self.serving.pod), lose) if ending.pods_fault else (lose,)

    def _lose(self, why: str, reason: str) -> Lose:
        self.ended = True
        self._drop_held()
        return Lose(why, reason)
