"""`Connection`: the GPT-Live protocol for one socket, sans I/O (gpt-live §3, §4, §6, §9).

Inputs in, commands out, like h11 and wsproto: `receive` takes a client frame, `deliver` the
engine's outputs for the session, `rejected` a refused start, `timer` the shared timer's tick,
`disconnect` the client's departure and `shutdown` a server stop. Each returns a list of
`Command`s for the pump to perform in order. No awaits, no sockets, no clock: time arrives as
arguments, and `deadline_ns` says when the connection next wants `timer`.

What happened to a session (`Accepted`, `Refused`, `Ended`: an `Outcome`) is not a command: it
is appended to `outcomes`, which the pump takes after each input and tells whoever counts
(`gptlive.server.backend.Observer` says when and why). Outcomes are rare (a few per session) and
commands are per frame, so the per-frame inputs (`receive` of an append, `deliver` of audio)
allocate nothing for them: no result object around the list, and the pump's check is one
empty-list test.

The machine does not know which side it serves (h11's rule). A server whose upstream talks to the
client itself (a gateway) ends its part with `started_upstream`: the `Accepted` is told, the
machine is done, and the `Handoff` it returns is what the relayed session's own machine needs
(`gptlive.server.passthrough`).

Which command is legal in which state is the `LEGAL` table below, and nowhere else. Usage events
are driven by the frames sent (every `usage_period_ms` of session time), so a live session needs
no timer at all; only idle guard, pending start and close grace have deadlines.

A socket gets at most `errors_per_s` `error` replies per second (counted on the clock of the
messages they answer): past that `reading` is False until the second is over, so a client that
answers every error with a new bad event is held back by its own socket, and still gets every
answer.
"""

from __future__ import annotations

import binascii
import dataclasses
import enum
from dataclasses import dataclass
from typing import final

from liveplex.gptlive import errors, events, fork, formats, start
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.served import Served
from liveplex.gptlive.settings import Settings
from liveplex.live import contract

# --- actions -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Send:
    """Send one server event."""

    event: events.ServerEvent
    frame: bool = False
    """An audio delta: counts against the slow-client limit."""


@dataclass(frozen=True, slots=True)
class Start:
    """Start the session on the backend; it answers with `deliver` or `rejected`."""

    session: contract.Session
    resource: events.SessionResource
    text: str
    """The client's `session.start` frame as sent (a gateway forwards it verbatim)."""
    wake: start.Wake | None = None
    """A media session's wake policy (docs/pause.md): the call waits for its caller's speech."""


@dataclass(slots=True)  # not frozen: four per 80 ms per session, and a frozen __init__ costs twice as much
class Append:
    """Hand 24 kHz s16le caller audio to the session's `AudioSender`."""

    pcm: bytes


@dataclass(frozen=True, slots=True)
class Say:
    """Have the model say `text` (`session.commentary.append`): the session's `AudioSender.say`."""

    text: str


@dataclass(frozen=True, slots=True)
class Hangup:
    """Close the session's `AudioSender`: the engine answers `Closed(HANGUP)` at its next tick."""


@dataclass(frozen=True, slots=True)
class Release:
    """Let go of the session: close both pipe ends and stop awaiting its outputs."""


@dataclass(frozen=True, slots=True)
class Close:
    """Close the socket with this code after everything queued before it was sent."""

    code: int


@final  # the pump tells outcomes apart by `type(o) is`: no subclass may hide among them
@dataclass(frozen=True, slots=True)
class Accepted:
    """A session started (counted once, when `session.started` is sent or relayed)."""

    session_id: str


@final
@dataclass(frozen=True, slots=True)
class Refused:
    """A start was refused: `server_busy`, `server_error`, `invalid` or `upstream` (relayed)."""

    reason: str


@final
@dataclass(frozen=True, slots=True)
class Ended:
    """A started session ended: `close_requested`, `expired`, `connection_lost`, `remote_hangup`
    or `server_shutdown`, after `seconds` of session time (`frames` audio deltas sent)."""

    reason: str
    seconds: float
    underruns: int = 0
    dropped: int = 0
    session_id: str = ""
    frames: int = 0
    safety_identifier: str | None = None
    """The client's id for its end user, for the session's log line (never for routing)."""


Command = Send | Start | Append | Say | Hangup | Release | Close
"""What the pump performs, in order."""
Outcome = Accepted | Refused | Ended
"""What happened to a session: told to whoever counts (`Connection.outcomes`), not performed."""


@dataclass(frozen=True, slots=True)
class Handoff:
    """A session started on an upstream that talks to the client itself: what its end needs."""

    resource: events.SessionResource
    """As started, with the upstream's `expires_at`: a `session.closed` made for it repeats it."""
    info: contract.LiveInfo
    """The served engine's, for the session time of the frames relayed."""


NORMAL = 1000
GOING_AWAY = 1001
POLICY_VIOLATION = 1008
"""A socket refused after its upgrade (a re-attach to no session it may continue): not retried."""
INTERNAL_ERROR = 1011

ERROR_WINDOW_NS = 1_000_000_000
"""The window `Settings.errors_per_s` counts over."""
START_ANSWER: tuple[type, ...] = (events.SessionStarted, events.Info)
"""What a server answers an accepted `session.start` with, before anything the session makes:
`session.started`, then the start's notes (`start.Prepared.notes`). A gateway that replays a moved
session's start to its next pod swallows all of it (`gateway.relaying`): the client heard it once."""


# --- states and the legality table ------------------------------------------------------------------

class State(enum.Enum):
    """gpt-live §3."""

    IDLE = "idle"
    """No session: upgrade done, or a start was refused."""
    STARTING = "starting"
    """A valid start is with the engine; the socket is not read."""
    LIVE = "live"
    """`session.started` was sent."""
    CLOSING = "closing"
    """`session.close` received; waiting for the engine's `Closed`."""
    DONE = "done"
    """The socket is closing or gone; nothing more is sent."""

    __hash__ = object.__hash__
    """Members are singletons compared by identity; `Enum`'s own hash runs Python code on every
    `LEGAL` lookup, four times per 80 ms of caller audio."""


_IDLE, _STARTING, _LIVE, _CLOSING, _DONE = (State.IDLE, State.STARTING, State.LIVE, State.CLOSING, State.DONE)
"""Module names for the states the per-frame paths test: an `Enum` member's class attribute costs
about three times a module global on CPython 3.11."""
_READ_STATES = (_IDLE, _LIVE, _CLOSING)
"""The states whose socket is read: not while a start is pending, not once done."""


class Verdict(enum.Enum):
    ACCEPT = "accept"
    NOT_STARTED = "not_started"
    ALREADY_STARTED = "already_started"
    CLOSING = "closing"
    IGNORE = "ignore"


_A, _NS, _AS, _CL, _IG = (Verdict.ACCEPT, Verdict.NOT_STARTED, Verdict.ALREADY_STARTED,
                          Verdict.CLOSING, Verdict.IGNORE)
_COLUMNS = events.SUPPORTED
LEGAL: dict[State, dict[str, Verdict]] = {
    state: dict(zip(_COLUMNS, row, strict=True)) for state, row in (
        #               start  append mute  unmute close commentary
        (State.IDLE,    (_A,   _NS,   _NS,  _NS,   _NS,  _NS)),
        (State.LIVE,    (_AS,  _A,    _A,   _A,    _A,   _A)),
        (State.CLOSING, (_CL,  _IG,   _CL,  _CL,   _CL,  _CL)),
    )
}
"""gpt-live §3: what each supported command does in each state the socket is read in.
Refused and unknown types are answered in every state by `events.parse`."""


def _b64decode(text: str) -> bytes | None:
    """Standard base64, padding optional (gpt-live §6.1); None when invalid.

    Strict: only the alphabet, then at most two `=` at the very end. `a2b_base64(strict_mode=True)`
    checks that while it decodes, at about the lenient decoder's speed and faster than a separate
    check before it (docs/bench.md), except that CPython 3.11 accepts `=` past a complete quad
    ("AAAA="): padded, that is a third `=`.
    """
    pad = -len(text) % 4
    data = text + "=" * pad if pad else text
    if data[-3:] == "===":
        return None
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):  # ValueError: not ASCII
        return None


def _b64encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def usage_seconds(info: contract.LiveInfo, frames: int) -> float:
    """The session time of `frames` audio deltas, as usage and `session.closed` say it."""
    return round(info.frame_ms(frames) / 1000, 2)


def session_ended(reason: str, resource: events.SessionResource, info: contract.LiveInfo, frames: int,
                  counts: tuple[int, int] = (0, 0)) -> Ended:
    """The `Ended` of a session after `frames` audio deltas; `counts`: its underruns and dropped
    samples."""
    return Ended(reason, usage_seconds(info, frames), *counts, resource.id, frames, resource.safety_identifier)


class Connection:
    """The protocol state of one socket; see the module docstring."""

    def __init__(self, catalog: start.Catalog, settings: Settings, now_ns: int,
                 session_id: str | None = None, pausable: bool = False, media: bool = False,
                 stores: bool = False) -> None:
        self.catalog = catalog
        self.settings = settings
        self.state = State.IDLE
        self._due_ns: int | None = now_ns + settings.idle_guard_ms * 1_000_000
        """The protocol's own deadline (idle guard, pending start, close grace)."""
        self._quiet_until_ns: int | None = None
        """Set while the socket spent its error budget: not read until then."""
        self.deadline_ns: int | None = self._due_ns
        """When `timer` must next be called; None while nothing is due (a live session)."""
        self._errors_left = settings.errors_per_s
        self._window_end_ns = now_ns + ERROR_WINDOW_NS
        self._session_id = session_id
        """Given by the caller (a gateway's placement), else minted per start."""
        self._last_message_ns = now_ns
        self._pending: start.Prepared | None = None
        self._pending_event_id: str | None = None
        self._served: Served | None = None
        self._resource: events.SessionResource | None = None
        self._inbound: formats.Inbound | None = None
        self._outbound: formats.Outbound | None = None
        self._muted = False
        self._frames_sent = 0
        self._paused_frames: int | None = 0 if pausable else None
        """Frames of time the session spent paused (docs/pause.md); None: it never pauses, and
        its usage has no breakdown (until a start with a wake policy)."""
        self._media = media
        """The start may carry a media session's fields (`wake_policy`, `idle_timeout_s`): a
        WebRTC call's machine, or a pod's for a gateway's socket (the gateway checked them)."""
        self._stores = stores
        """`store: true` may be accepted: a gateway with a store, or a pod's machine for a
        gateway's socket (the gateway stores the session)."""
        self._fork: fork.Source | None = None
        """Set by `fork_from`: a `session.start` continues this stored session (a fork's socket)."""
        self._next_usage_ms = settings.usage_period_ms
        self._close_event_id: str | None = None
        self.outcomes: list[Outcome] = []
        """What happened to the session in the inputs so far; the pump takes them after each
        input (see the module docstring)."""

    @property
    def reading(self) -> bool:
        """Whether the pump may read the socket: not while a start is pending (gpt-live §2.4),
        nor for the rest of a second in which the client spent its error budget."""
        return self._quiet_until_ns is None and self.state in _READ_STATES

    @property
    def frames_sent(self) -> int:
        return self._frames_sent

    @property
    def resource(self) -> events.SessionResource | None:
        """The running session's, as `session.started` gave it (None before a start was taken)."""
        return self._resource

    # --- inputs ----------------------------------------------------------------------------------------

    def receive(self, data: str | bytes, now_ns: int, unix_s: float) -> list[Command]:
        """One client frame; `now_ns` is monotonic, `unix_s` wall time (for `expires_at`)."""
        state = self.state
        if state is _DONE:
            return []
        if state is _STARTING:
            raise RuntimeError("the socket must not be read while a start is pending")
        self._last_message_ns = now_ns
        if state is _IDLE:  # the idle guard restarts on every client message
            self._due(now_ns + self.settings.idle_guard_ms * 1_000_000)
            if self._fork is not None:  # a fork's start carries only its overrides
                forked = fork.start_text(self._fork, data)
                if type(forked) is events.Invalid:
                    self.outcomes.append(Refused("invalid"))
                    return [self._error(forked.error, forked.event_id)]
                data = forked
        event = events.parse(data)
        if type(event) is events.Invalid:
            return [self._error(event.error, event.event_id)]
        wire_type = events.type_of(event)
        prepared: start.Prepared | None = None
        if type(event) is events.SessionStart:
            try:  # step 5 continued: model, voice and instructions (gpt-live §4.4)
                session_id = self._session_id or events.new_session_id()
                prepared = start.check_start(self.catalog, event, session_id, unix_s,
                                             self.settings.info_events, self._media, self._stores)
            except ProtocolError as error:
                self.outcomes.append(Refused("invalid"))
                return [self._error(error, event.event_id)]
        verdict = LEGAL[state][wire_type]
        if verdict is _IG:
            return []
        if verdict is _NS:
            return [self._error(errors.session_not_started(wire_type), event.event_id)]
        if verdict is _AS:
            return [self._error(errors.session_already_started(), event.event_id)]
        if verdict is _CL:
            return [self._error(errors.session_closing(wire_type), event.event_id)]
        if prepared is not None:
            assert isinstance(data, str)  # a bytes frame never parses as a start
            self._pending, self._pending_event_id = prepared, event.event_id
            self.state = State.STARTING
            self._due(now_ns + self.settings.start_timeout_ms * 1_000_000)
            return [Start(prepared.session, prepared.resource, data, prepared.wake)]
        if type(event) is events.InputAudioAppend:
            return self._append(event)
        if type(event) is events.InputAudioMute:
            self._muted = True
            return [Send(events.InputAudioMuted(event.event_id))]
        if type(event) is events.InputAudioUnmute:
            self._muted = False
            return [Send(events.InputAudioUnmuted(event.event_id))]
        if type(event) is events.CommentaryAppend:  # acked where the timeline stands: the next frame
            at_ms = self._info.frame_ms(self._frames_sent)
            return [Send(events.CommentaryAppended(at_ms, event.event_id)), Say(event.content)]
        assert type(event) is events.SessionClose
        self.state = State.CLOSING
        self._close_event_id = event.event_id
        self._due(now_ns + self.settings.close_grace_ms * 1_000_000)
        return [Hangup()]

    def fork_from(self, source: fork.Source) -> None:
        """This socket's start forks `source` (its settings read from the store): the client's
        `session.start` carries only a fork's overrides (`fork.start_text`), and the session gets
        a new id. Before it, a fork's socket is not read (`passthrough.Pending`)."""
        self._fork = source

    def media(self, pcm: bytes) -> list[Command]:
        """Caller audio from a media transport (a WebRTC call's RTP, decoded to 24 kHz PCM: the
        call's session format): appended as a chunk of it would be, muted as one would be, and
        dropped outside a live session (there is no client message to answer)."""
        if self.state is not _LIVE:
            return []
        inbound = self._inbound
        assert inbound is not None
        return [Append(inbound.convert(pcm, self._muted))]

    def rejected(self, error: ProtocolError | None) -> list[Command]:
        """The backend refused the pending start; None when it already told the client itself
        (a gateway relaying its upstream's error verbatim)."""
        if self.state is not State.STARTING:
            return []
        return self._refuse(error)

    def busy(self) -> ProtocolError:
        """The `server_busy` error for the pending start's server (its capacity in the text)."""
        served = self._pending.served if self._pending else self._served
        return errors.server_busy(served.info.max_sessions if served else 0)

    def started_upstream(self, expires_at: int | None = None) -> Handoff | None:
        """The pending start was taken by an upstream server that talks to the client itself (it
        sent `session.started`, relayed): `Accepted`, and this machine's part is over (DONE, not
        read). None when no start was pending.

        `expires_at` is the upstream's, so a `session.closed` made for it repeats it exactly."""
        pending = self._pending
        if self.state is not State.STARTING or pending is None:
            return None
        resource = pending.resource
        if expires_at is not None:
            resource = dataclasses.replace(resource, expires_at=expires_at)
        self._begin(pending, resource)
        self.state = State.DONE
        self.outcomes.append(Accepted(resource.id))
        return Handoff(resource, pending.served.info)

    def handed_over(self, code: int) -> list[Command]:
        """The engine exported the session (docs/continuity.md): it ends here without
        `session.closed`, counted as `handed_over`, and the socket closes with `code` (the hop's
        `HANDED_OVER_CLOSE`) so the gateway continues it on another pod."""
        if self.state not in (State.LIVE, State.CLOSING):
            return []
        self.state = State.DONE
        self._due(None)
        self._end("handed_over")
        return [Release(), Close(code)]

    def deliver(self, outputs: list[contract.Output]) -> list[Command]:
        """The engine's outputs for this session, in order; an empty list means they ended."""
        if self.state is State.DONE:
            return []
        if not outputs:
            return self._engine_lost("the engine ended the session without closing it")
        actions: list[Command] = []
        for out in outputs:
            if type(out) is contract.Audio:
                actions += self._audio(out)
            elif type(out) is contract.Text:
                if self.state in (State.LIVE, State.CLOSING):
                    info = self._info
                    actions.append(Send(events.OutputTranscriptDelta(
                        out.delta, info.frame_ms(out.frame), info.frame_ms(out.frame + 1))))
            elif type(out) is contract.Started:
                actions += self._started(out.frames)
            elif type(out) is contract.Paused or type(out) is contract.Resumed:
                actions += self._pause(out)
            else:
                assert isinstance(out, contract.Closed)
                actions += self._closed(out)
                break
        return actions

    def timer(self, now_ns: int) -> list[Command]:
        """The shared timer's tick; acts only once `deadline_ns` has passed."""
        if self.deadline_ns is None or now_ns < self.deadline_ns:
            return []
        quiet = self._quiet_until_ns
        if quiet is not None and now_ns >= quiet:  # read again, with a fresh budget
            self._quiet_until_ns = None
            self._errors_left = self.settings.errors_per_s
            self._window_end_ns = now_ns + ERROR_WINDOW_NS
            self._due(self._due_ns)
            if self.deadline_ns is None or now_ns < self.deadline_ns:
                return []
        if self.state is State.IDLE:  # pre-start idle guard: no session existed, nothing to say
            self.state = State.DONE
            self._due(None)
            return [Close(NORMAL)]
        if self.state is State.STARTING:
            return self._refuse(errors.server_error("the engine did not answer the start"))
        if self.state is State.CLOSING:  # close grace: the engine did not answer in time
            return self._finish("close_requested", self._close_event_id, NORMAL)
        self._due(None)
        return []

    def disconnect(self) -> list[Command]:
        """The client is gone (close frame, error, EOF, failed send): hang the session up."""
        state = self.state
        self.state = State.DONE
        self._due(None)
        if state is _LIVE or state is _CLOSING:
            self._end("remote_hangup")
        return [Release()] if state in (_STARTING, _LIVE, _CLOSING) else []

    def shutdown(self) -> list[Command]:
        """The server is stopping: end a running session as `server_shutdown` (gpt-live §9.2)."""
        if self.state in (State.LIVE, State.CLOSING):
            return [self._error(errors.server_shutdown(), None),
                    *self._finish("connection_lost", None, GOING_AWAY, ended="server_shutdown")]
        had_session = self.state is State.STARTING
        self.state = State.DONE
        self._due(None)
        return [Release(), Close(GOING_AWAY)] if had_session else [Close(GOING_AWAY)]

    # --- session.start ---------------------------------------------------------------------------------

    @property
    def _info(self) -> contract.LiveInfo:
        assert self._served is not None
        return self._served.info

    def _begin(self, pending: start.Prepared, resource: events.SessionResource) -> None:
        self._pending = None
        self._served = pending.served
        self._resource = resource
        self._due(None)

    def _started(self, frames: int) -> list[Command]:
        """`frames`: what the session ran before it was imported here (a handover, a resume, a
        fork); usage counts on, and it expires when what its engine allows is spent, earlier than a
        new session would by those frames."""
        pending = self._pending
        if self.state is not State.STARTING or pending is None:
            return []
        resource = pending.resource
        if frames:
            spent_s = pending.served.info.frame_ms(frames) // 1000
            resource = dataclasses.replace(resource, expires_at=resource.expires_at - spent_s)
        self._begin(pending, resource)
        if pending.wake is not None and self._paused_frames is None:
            self._paused_frames = 0
        if frames:
            period = self.settings.usage_period_ms
            self._frames_sent = frames
            self._next_usage_ms = (self._info.frame_ms(frames) // period + 1) * period
        self._inbound = formats.Inbound(pending.resource.format)
        self._outbound = formats.Outbound(pending.resource.format)
        self.state = State.LIVE
        self.outcomes.append(Accepted(resource.id))
        started = Send(events.SessionStarted(resource, self._pending_event_id))
        return [started, *(Send(note) for note in pending.notes)]

    def _refuse(self, error: ProtocolError | None) -> list[Command]:
        """The pending start failed: error, no session, the socket stays open (gpt-live §8.3)."""
        self._pending = None
        self.state = State.IDLE
        self._due(self._last_message_ns + self.settings.idle_guard_ms * 1_000_000)
        if error is None:
            self.outcomes.append(Refused("upstream"))
            return [Release()]
        self.outcomes.append(Refused(error.code.value))
        return [self._error(error, self._pending_event_id), Release()]

    # --- live session ---------------------------------------------------------------------------------

    def _append(self, event: events.InputAudioAppend) -> list[Command]:
        inbound = self._inbound
        assert inbound is not None
        limit = inbound.max_bytes
        audio = event.audio
        if len(audio) > (limit + 2) // 3 * 4 + 4:  # refuse before decoding megabytes
            return [self._error(errors.invalid_audio("more than 30 s of audio"), event.event_id)]
        raw = _b64decode(audio)
        if raw is None:
            reason = "not valid base64"
        elif not raw:
            reason = "the chunk is empty"
        elif len(raw) % inbound.codec.sample_bytes:
            reason = "not a whole number of samples"
        elif len(raw) > limit:
            reason = "more than 30 s of audio"
        else:
            pcm = inbound.convert(raw, self._muted)
            return [Append(pcm)] if pcm else []
        return [self._error(errors.invalid_audio(reason), event.event_id)]

    def _audio(self, out: contract.Audio) -> list[Command]:
        state = self.state
        if state is not _LIVE and state is not _CLOSING:
            return []
        outbound = self._outbound
        assert outbound is not None
        self._frames_sent += 1
        delta = Send(events.OutputAudioDelta(_b64encode(outbound.convert(out.pcm))), True)
        if state is _LIVE and self._info.frame_ms(self._frames_sent) >= self._next_usage_ms:
            self._next_usage_ms += self.settings.usage_period_ms
            return [delta, Send(events.UsageUpdated(self._usage_seconds(), self._context_ratio(),
                                                    paused_seconds=self._paused_seconds()))]
        return [delta]

    def _pause(self, out: contract.Paused | contract.Resumed) -> list[Command]:
        """The pod took the session out of the batch or brought it back (docs/pause.md)."""
        if self.state is not _LIVE and self.state is not _CLOSING:
            return []
        if type(out) is contract.Paused:
            return [Send(events.SessionPaused())]
        assert type(out) is contract.Resumed
        if self._paused_frames is not None:
            self._paused_frames += out.paused_frames
        return [Send(events.SessionResumed())] if out.woke else []

    def _context_ratio(self) -> float | None:
        """The share of the engine's window the session's frames fill (None: no window)."""
        window = self._info.context_frames
        if not window:
            return None
        return round(min(self._frames_sent, window) / window, 4)

    def _usage_seconds(self) -> float:
        return usage_seconds(self._info, self._frames_sent + (self._paused_frames or 0))

    def _paused_seconds(self) -> float | None:
        paused = self._paused_frames
        return None if paused is None else usage_seconds(self._info, paused)

    def _closed(self, closed: contract.Closed) -> list[Command]:
        if self.state is State.STARTING:
            if closed.reason is contract.CloseReason.BUSY:
                return self._refuse(self.busy())
            return self._refuse(errors.server_error("the engine could not start the session"))
        counts = (closed.underruns, closed.dropped)
        if closed.reason is contract.CloseReason.EXPIRED:
            return self._finish("expired", self._close_event_id, NORMAL, counts=counts)
        if closed.reason is contract.CloseReason.HANGUP and self.state is State.CLOSING:
            return self._finish("close_requested", self._close_event_id, NORMAL, counts=counts)
        return self._engine_lost("the engine aborted the session", counts)

    def _engine_lost(self, detail: str, counts: tuple[int, int] = (0, 0)) -> list[Command]:
        """Engine fault after start: server_error, connection_lost, close 1011 (gpt-live §9.2)."""
        if self.state is State.STARTING:
            return self._refuse(errors.server_error(detail))
        return [self._error(errors.server_error(detail), None),
                *self._finish("connection_lost", None, INTERNAL_ERROR, counts=counts)]

    def _finish(self, reason: str, client_event_id: str | None, code: int,
                ended: str | None = None, counts: tuple[int, int] = (0, 0)) -> list[Command]:
        """`session.closed` with `reason`, then the close; `ended` is the reason counted, when it
        differs from what the client is told (a shutdown is `connection_lost` on the wire)."""
        assert self._resource is not None
        self.state = State.DONE
        self._due(None)
        seconds = self._usage_seconds()
        closed = events.SessionClosed(reason, self._resource, seconds, client_event_id,
                                      paused_seconds=self._paused_seconds())
        self._end(ended or reason, counts)
        return [Send(closed), Close(code), Release()]

    def _end(self, reason: str, counts: tuple[int, int] = (0, 0)) -> None:
        """The session ended: its `Ended` outcome."""
        assert self._resource is not None
        self.outcomes.append(session_ended(reason, self._resource, self._info, self._frames_sent, counts))

    def _error(self, error: ProtocolError, client_event_id: str | None) -> Send:
        """An `error` reply, spent from this second's budget."""
        now_ns = self._last_message_ns
        if now_ns >= self._window_end_ns:
            self._window_end_ns = now_ns + ERROR_WINDOW_NS
            self._errors_left = self.settings.errors_per_s
        self._errors_left -= 1
        if self._errors_left <= 0 and self.state is not State.DONE:
            self._quiet_until_ns = self._window_end_ns
            self._due(self._due_ns)
        return Send(events.Error(error, client_event_id))

    def _due(self, ns: int | None) -> None:
        """Set the protocol's deadline; `deadline_ns` is the earlier of it and the end of a quiet
        spell (a closed socket has no quiet spell)."""
        self._due_ns = ns
        quiet = self._quiet_until_ns
        if quiet is None or self.state is State.DONE:
            self.deadline_ns = ns
        else:
            self.deadline_ns = quiet if ns is None else min(ns, quiet)
