"""`Connection`: the GPT-Live protocol for one socket, sans I/O (gpt-live §3, §4, §6, §9).

Inputs in, actions out, like h11 and wsproto: `receive` takes a client frame, `deliver` the
engine's outputs for the session, `rejected` a refused engine start, `timer` the shared timer's
tick, `disconnect` the client's departure and `shutdown` a server stop. Each returns a list of
`Action`s for the pump to perform in order. No awaits, no sockets, no clock: time arrives as
arguments, and `deadline_ns` says when the connection next wants `timer`.

Which command is legal in which state is the `LEGAL` table below, and nowhere else. Usage events
are driven by the frames sent (every `usage_period_ms` of session time), so a live session needs
no timer at all; only idle guard, pending start and close grace have deadlines.
"""

from __future__ import annotations

import binascii
import enum
import math
from dataclasses import dataclass

from liveplex.gptlive import errors, events, formats
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.tally import Tally
from liveplex.gptlive.voices import DEFAULT_VOICE, Voices
from liveplex.live import channel, contract

# --- actions -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Send:
    """Send one server event."""

    event: events.ServerEvent
    frame: bool = False
    """An audio delta: counts against the slow-client limit."""


@dataclass(frozen=True, slots=True)
class Start:
    """Submit the session to the engine (`LiveHandle.start`), then report a `Rejected`."""

    session: contract.Session


@dataclass(frozen=True, slots=True)
class Append:
    """Hand 24 kHz s16le caller audio to the session's `AudioSender`."""

    pcm: bytes


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


Action = Send | Start | Append | Hangup | Release | Close

NORMAL = 1000
GOING_AWAY = 1001
INTERNAL_ERROR = 1011


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


class Verdict(enum.Enum):
    ACCEPT = "accept"
    NOT_STARTED = "not_started"
    ALREADY_STARTED = "already_started"
    CLOSING = "closing"
    IGNORE = "ignore"


_A, _NS, _AS, _CL, _IG = (Verdict.ACCEPT, Verdict.NOT_STARTED, Verdict.ALREADY_STARTED,
                          Verdict.CLOSING, Verdict.IGNORE)
_COLUMNS = ("session.start", "session.input_audio.append", "session.input_audio.mute",
            "session.input_audio.unmute", "session.close")
LEGAL: dict[State, dict[str, Verdict]] = {
    state: dict(zip(_COLUMNS, row, strict=True)) for state, row in (
        #               start  append mute  unmute close
        (State.IDLE,    (_A,   _NS,   _NS,  _NS,   _NS)),
        (State.LIVE,    (_AS,  _A,    _A,   _A,    _A)),
        (State.CLOSING, (_CL,  _IG,   _CL,  _CL,   _CL)),
    )
}
"""gpt-live §3: what each supported command does in each state the socket is read in.
Refused and unknown types are answered in every state by `events.parse`."""


@dataclass(frozen=True, slots=True)
class _Pending:
    """A start on its way to the engine."""

    resource: events.SessionResource
    client_event_id: str | None
    info: tuple[events.Info, ...]


_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64decode(text: str) -> bytes | None:
    """Standard base64, padding optional (gpt-live §6.1); None when invalid.

    Strict: only the alphabet, then at most two `=` at the very end. Checked with one C-speed
    `translate` before the lenient decoder, which together cost about two thirds of
    `a2b_base64(strict_mode=True)` on an 80 ms frame (docs/bench.md); the result is the same.
    """
    if not text.isascii():
        return None
    data = (text + "=" * (-len(text) % 4)).encode("ascii")
    rest = data.translate(None, _B64_ALPHABET)  # everything that is not the alphabet
    if rest and (len(rest) > 2 or rest.strip(b"=") or not data.endswith(rest)):
        return None
    try:
        return binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return None


def _b64encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


class Connection:
    """The protocol state of one socket; see the module docstring."""

    def __init__(self, info: contract.LiveInfo, settings: Settings, voices: Voices, tally: Tally,
                 now_ns: int) -> None:
        self.info = info
        self.settings = settings
        self.voices = voices
        self.tally = tally
        self.state = State.IDLE
        self.deadline_ns: int | None = now_ns + settings.idle_guard_ms * 1_000_000
        """When `timer` must next be called; None while nothing is due (a live session)."""
        self._models = (info.model, *settings.model_aliases)
        self._max_seconds = info.frame_ms(info.max_frames) / 1000
        self._last_message_ns = now_ns
        self._pending: _Pending | None = None
        self._resource: events.SessionResource | None = None
        self._inbound: formats.Inbound | None = None
        self._outbound: formats.Outbound | None = None
        self._muted = False
        self._frames_sent = 0
        self._next_usage_ms = settings.usage_period_ms
        self._close_event_id: str | None = None

    @property
    def reading(self) -> bool:
        """Whether the pump may read the socket: not while a start is pending (gpt-live §2.4)."""
        return self.state in (State.IDLE, State.LIVE, State.CLOSING)

    @property
    def frames_sent(self) -> int:
        return self._frames_sent

    # --- inputs ----------------------------------------------------------------------------------------

    def receive(self, data: str | bytes, now_ns: int, unix_s: float) -> list[Action]:
        """One client frame; `now_ns` is monotonic, `unix_s` wall time (for `expires_at`)."""
        if self.state is State.DONE:
            return []
        if self.state is State.STARTING:
            raise RuntimeError("the socket must not be read while a start is pending")
        self._last_message_ns = now_ns
        if self.state is State.IDLE:  # the idle guard restarts on every client message
            self.deadline_ns = now_ns + self.settings.idle_guard_ms * 1_000_000
        event = events.parse(data)
        if isinstance(event, events.Invalid):
            return [self._error(event.error, event.event_id)]
        kind = events.type_of(event)
        prepared: tuple[contract.Session, _Pending] | None = None
        if isinstance(event, events.SessionStart):
            try:  # step 5 continued: model, voice and instructions (gpt-live §4.4)
                prepared = self._prepare(event, unix_s)
            except ProtocolError as error:
                self.tally.rejected["invalid"] += 1
                return [self._error(error, event.event_id)]
        verdict = LEGAL[self.state][kind]
        if verdict is Verdict.IGNORE:
            return []
        if verdict is Verdict.NOT_STARTED:
            return [self._error(errors.session_not_started(kind), event.event_id)]
        if verdict is Verdict.ALREADY_STARTED:
            return [self._error(errors.session_already_started(), event.event_id)]
        if verdict is Verdict.CLOSING:
            return [self._error(errors.session_closing(kind), event.event_id)]
        if prepared is not None:
            session, self._pending = prepared
            self.state = State.STARTING
            self.deadline_ns = now_ns + self.settings.start_timeout_ms * 1_000_000
            return [Start(session)]
        if isinstance(event, events.InputAudioAppend):
            return self._append(event)
        if isinstance(event, events.InputAudioMute):
            self._muted = True
            return [Send(events.InputAudioMuted(event.event_id))]
        if isinstance(event, events.InputAudioUnmute):
            self._muted = False
            return [Send(events.InputAudioUnmuted(event.event_id))]
        assert isinstance(event, events.SessionClose)
        self.state = State.CLOSING
        self._close_event_id = event.event_id
        self.deadline_ns = now_ns + self.settings.close_grace_ms * 1_000_000
        return [Hangup()]

    def rejected(self, why: channel.Rejected) -> list[Action]:
        """`LiveHandle.start` refused the pending start without queueing it."""
        if self.state is not State.STARTING:
            return []
        if why is channel.Rejected.FULL:
            return self._refuse(errors.server_busy(self.info.max_sessions), "server_busy")
        return self._refuse(errors.server_error(why.value), "server_error")

    def deliver(self, outputs: list[contract.Output]) -> list[Action]:
        """The engine's outputs for this session, in order; an empty list means they ended."""
        if self.state is State.DONE:
            return []
        if not outputs:
            return self._engine_lost("the engine ended the session without closing it")
        actions: list[Action] = []
        for out in outputs:
            if type(out) is contract.Audio:
                actions += self._audio(out)
            elif type(out) is contract.Text:
                if self.state in (State.LIVE, State.CLOSING):
                    start_ms = self.info.frame_ms(out.frame)
                    actions.append(Send(events.OutputTranscriptDelta(
                        out.delta, start_ms, self.info.frame_ms(out.frame + 1))))
            elif type(out) is contract.Started:
                actions += self._started()
            else:
                assert isinstance(out, contract.Closed)
                actions += self._closed(out)
                break
        return actions

    def timer(self, now_ns: int) -> list[Action]:
        """The shared timer's tick; acts only once `deadline_ns` has passed."""
        if self.deadline_ns is None or now_ns < self.deadline_ns:
            return []
        if self.state is State.IDLE:  # pre-start idle guard: no session existed, nothing to say
            self.state = State.DONE
            self.deadline_ns = None
            return [Close(NORMAL)]
        if self.state is State.STARTING:
            return self._refuse(errors.server_error("the engine did not answer the start"),
                                "server_error")
        if self.state is State.CLOSING:  # close grace: the engine did not answer in time
            return self._finish("close_requested", self._close_event_id, NORMAL)
        self.deadline_ns = None
        return []

    def disconnect(self) -> list[Action]:
        """The client is gone (close frame, error, EOF, failed send): hang the session up."""
        had_session = self.state in (State.STARTING, State.LIVE, State.CLOSING)
        if self.state in (State.LIVE, State.CLOSING):
            self.tally.closed["remote_hangup"] += 1
        self.state = State.DONE
        self.deadline_ns = None
        return [Release()] if had_session else []

    def shutdown(self) -> list[Action]:
        """The server is stopping: end a running session as `server_shutdown` (gpt-live §9.2)."""
        if self.state in (State.LIVE, State.CLOSING):
            self.tally.closed["server_shutdown"] += 1
            return [self._error(errors.server_shutdown(), None),
                    *self._finish("connection_lost", None, GOING_AWAY, count=False)]
        had_session = self.state is State.STARTING
        self.state = State.DONE
        self.deadline_ns = None
        return [Release(), Close(GOING_AWAY)] if had_session else [Close(GOING_AWAY)]

    # --- session.start ---------------------------------------------------------------------------------

    def _prepare(self, event: events.SessionStart,
                 unix_s: float) -> tuple[contract.Session, _Pending]:
        config = event.session
        if config.model not in self._models:
            raise errors.model_not_found(config.model, self._models)
        native = None if config.voice is None else self.voices.resolve(config.voice)
        try:
            session = self.info.check(contract.SessionDraft(native, config.instructions))
        except contract.CheckError as exc:
            if exc.param == "instructions":
                text = config.instructions
                length = len(text if text and text.strip() else self.info.default_instructions)
                raise errors.string_above_max_length(
                    ("session", "instructions"), length, self.info.max_instructions_chars) from exc
            raise errors.invalid_value(("session", "audio", "output", "voice"),
                                       native, self.info.voices) from exc
        voice = DEFAULT_VOICE if config.voice is None else config.voice
        resource = events.SessionResource(
            id=events.new_session_id(),
            expires_at=math.floor(unix_s + self._max_seconds),
            model=config.model,
            instructions=session.instructions,
            format=config.format or events.DEFAULT_FORMAT,
            voice=voice,
            delegation=config.delegation,
        )
        notes: list[events.Info] = []
        if self.settings.info_events:
            if voice != session.voice:
                shown = voice.id if isinstance(voice, events.CustomVoice) else voice
                notes.append(events.Info("voice_mapped",
                                         f"Voice '{shown}' is served by the native voice "
                                         f"'{session.voice}'.", event.event_id))
            if session.instructions != config.instructions:
                notes.append(events.Info("default_instructions",
                                         "No instructions were given; the server default is used.",
                                         event.event_id))
        return session, _Pending(resource, event.event_id, tuple(notes))

    def _started(self) -> list[Action]:
        pending = self._pending
        if self.state is not State.STARTING or pending is None:
            return []
        self._pending = None
        self._resource = pending.resource
        self._inbound = formats.Inbound(pending.resource.format)
        self._outbound = formats.Outbound(pending.resource.format)
        self.state = State.LIVE
        self.deadline_ns = None
        self.tally.accepted += 1
        started = Send(events.SessionStarted(pending.resource, pending.client_event_id))
        return [started, *(Send(note) for note in pending.info)]

    def _refuse(self, error: ProtocolError, reason: str) -> list[Action]:
        """The pending start failed: error, no session, the socket stays open (gpt-live §8.3)."""
        pending = self._pending
        self._pending = None
        self.state = State.IDLE
        self.deadline_ns = self._last_message_ns + self.settings.idle_guard_ms * 1_000_000
        self.tally.rejected[reason] += 1
        return [self._error(error, pending.client_event_id if pending else None), Release()]

    # --- live session ---------------------------------------------------------------------------------

    def _append(self, event: events.InputAudioAppend) -> list[Action]:
        assert self._inbound is not None
        codec = self._inbound.codec
        limit = codec.max_chunk_bytes()
        if len(event.audio) > (limit + 2) // 3 * 4 + 4:  # refuse before decoding megabytes
            return [self._error(errors.invalid_audio("more than 30 s of audio"), event.event_id)]
        raw = _b64decode(event.audio)
        if raw is None:
            reason = "not valid base64"
        elif not raw:
            reason = "the chunk is empty"
        elif len(raw) % codec.sample_bytes:
            reason = "not a whole number of samples"
        elif len(raw) > limit:
            reason = "more than 30 s of audio"
        else:
            pcm = self._inbound.convert(raw, self._muted)
            return [Append(pcm)] if pcm else []
        return [self._error(errors.invalid_audio(reason), event.event_id)]

    def _audio(self, out: contract.Audio) -> list[Action]:
        if self.state not in (State.LIVE, State.CLOSING):
            return []
        assert self._outbound is not None
        self._frames_sent += 1
        delta = Send(events.OutputAudioDelta(_b64encode(self._outbound.convert(out.pcm))), True)
        if self.state is State.LIVE and self.info.frame_ms(self._frames_sent) >= self._next_usage_ms:
            self._next_usage_ms += self.settings.usage_period_ms
            return [delta, Send(events.UsageUpdated(self._usage_seconds()))]
        return [delta]

    def _usage_seconds(self) -> float:
        return round(self.info.frame_ms(self._frames_sent) / 1000, 2)

    def _closed(self, closed: contract.Closed) -> list[Action]:
        if self.state is State.STARTING:
            if closed.reason is contract.CloseReason.BUSY:
                return self._refuse(errors.server_busy(self.info.max_sessions), "server_busy")
            return self._refuse(errors.server_error("the engine could not start the session"),
                                "server_error")
        self.tally.underruns += closed.underruns
        self.tally.dropped_samples += closed.dropped
        if closed.reason is contract.CloseReason.EXPIRED:
            return self._finish("expired", self._close_event_id, NORMAL)
        if closed.reason is contract.CloseReason.HANGUP and self.state is State.CLOSING:
            return self._finish("close_requested", self._close_event_id, NORMAL)
        return self._engine_lost("the engine aborted the session")

    def _engine_lost(self, detail: str) -> list[Action]:
        """Engine fault after start: server_error, connection_lost, close 1011 (gpt-live §9.2)."""
        if self.state is State.STARTING:
            return self._refuse(errors.server_error(detail), "server_error")
        return [self._error(errors.server_error(detail), None),
                *self._finish("connection_lost", None, INTERNAL_ERROR)]

    def _finish(self, reason: str, client_event_id: str | None, code: int,
                count: bool = True) -> list[Action]:
        assert self._resource is not None
        self.state = State.DONE
        self.deadline_ns = None
        if count:
            self.tally.closed[reason] += 1
        closed = events.SessionClosed(reason, self._resource, self._usage_seconds(),
                                      client_event_id)
        return [Send(closed), Close(code), Release()]

    def _error(self, error: ProtocolError, client_event_id: str | None) -> Send:
        self.tally.errors[error.code.value] += 1
        return Send(events.Error(error, client_event_id))
