"""What the live socket pump asks of whatever serves sessions behind it: a pod's engine, or the
gateway's upstream relay.

The pump (`native.LiveSocket`) owns the client socket: reading, the protocol `Connection`, writes
with backpressure, closing. A `Backend` decides who may connect, builds each socket's `Connection`
(the pod trusts the gateway's session-id header; the gateway mints ids) and starts sessions; each
started session is a `Leg` the pump hands caller audio to. The backend answers through the `Peer`
it was given, in the backend's own terms (a start refused, the engine's outputs, an upstream's
frame relayed or its end); the pump turns each into its protocol machine's step and performs it,
so no backend drives a machine itself. The machine is the socket's `Connection`, and for a session
an upstream talks to the client about itself (the gateway's) `passthrough.Passthrough` from the hand-off
on (`Peer.handed_off`).

Each step gives commands (`connection.Command`: performed in order) and outcomes
(`connection.Outcome`: a session accepted, refused or ended). The pump tells each outcome once,
by its type, to every `Observer`: the server's `FrontStats` and the backend (a pod tells its
pool's Redis at once). It tells them before performing the step's commands, so a refusal or an
end reaches the backend while the session is still held (before its `Release`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from websockets.datastructures import Headers

from liveplex.gptlive import connection, fork
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server.replay import Replay
from liveplex.live import contract

logger = logging.getLogger(__name__)


class Peer(Protocol):
    """The client socket, as a backend sees it."""

    @property
    def conn(self) -> connection.Connection:
        """The socket's identity for the backend's own bookkeeping (it built it in `connection`)."""
        ...

    @property
    def dispatched(self) -> int:
        """Client messages handed to the protocol so far, in order."""
        ...

    def reached(self, messages: int) -> asyncio.Future[None]:
        """Resolved once `dispatched` is at least `messages` (at once if it is already): what an
        export awaits, the gateway's frames sent before it asked still on their way."""
        ...

    def freeze(self) -> int:
        """The session is leaving (an export): hand the protocol no more client messages, and say
        how many it was handed; what the client sends from now on is the gateway's to resend to
        the session's next pod."""
        ...

    def refuse(self, error: ProtocolError | None) -> None:
        """The pending start is refused with `error`; None when the refusal was already relayed."""

    def deliver(self, outputs: list[contract.Output]) -> None:
        """The engine's outputs for the session, in order; an empty list: it ended without a word."""

    def handed_over(self) -> None:
        """The engine exported the session (docs/continuity.md): end it without `session.closed`
        and close the socket with the hop's `HANDED_OVER_CLOSE`."""

    def handed_off(self, expires_at: int | None, frames: int = 0) -> None:
        """The upstream started the session (its `session.started` relayed), or took this socket
        for the running session it continues (`frames`: its count so far): from now on frames go
        to the leg's `forward` verbatim, and the session's end is one of the two below."""

    def await_upstream(self) -> None:
        """This socket continues a running session (a re-attach): read nothing until the upstream
        takes it (`handed_off`, after its start is given to `conn`) or it is refused (`close_with`)."""

    def fork_from(self, source: fork.Source) -> None:
        """This fork's stored session was read: its start forks `source`; read the client again."""

    def close_with(self, error: ProtocolError, code: int) -> None:
        """Tell the client `error` and close with `code`."""

    def send_verbatim(self, text: str, frame: bool) -> None:
        """Send text written elsewhere, verbatim: a frame an upstream server wrote (`frame` marks an
        audio delta), or the hop's own words a pod writes to the gateway (`hop`)."""

    def passthrough_ended(self, reason: str, code: int) -> None:
        """The upstream's `session.closed` was relayed; close as the upstream's socket closed."""

    def passthrough_lost(self, why: str) -> None:
        """The upstream went away mid-session: the client hears `why` and `connection_lost`."""

    @property
    def client_config(self) -> dict[str, Any] | None:
        """A WebRTC call's `session.client` as its create gave it (its data channel's
        permissions: a stored call keeps them for its forks); None for a socket."""
        ...

    @property
    def reconnects(self) -> bool:
        """Whether `hand_back` would close so that the client reconnects: False with no session
        relayed yet, and for a WebRTC call, whose media ends here."""
        ...

    def hand_back(self) -> bool:
        """This server stops but the relayed session goes on: close so that the client reconnects
        through another server and continues it (1012); False where it cannot (`reconnects`)."""
        ...

    replay: Replay | None
    """What this socket sent lately, kept for a caller who re-attaches (`replay.Replay`); None:
    nothing is kept (set by a pod's backend on the sessions a gateway relays)."""

    def taken_over(self) -> None:
        """The session went on on another socket (a re-attach): close this one with the hop's
        `TAKEN_OVER_CLOSE`, neither ending nor releasing the session."""


class Leg(Protocol):
    """One started (or starting) session on the backend."""

    def append(self, pcm: bytes) -> None:
        """24 kHz s16le caller audio (a pod's engine)."""

    def say(self, text: str) -> None:
        """Text for the model to say (`session.commentary.append`; a pod's engine)."""

    def forward(self, data: str | bytes) -> None:
        """A client frame of a relayed session, verbatim (the gateway's upstream)."""

    def hangup(self) -> None:
        """The caller asked to close: the backend answers with the session's end."""

    def release(self) -> None:
        """Let go of the session at once; nothing more is delivered to the peer."""


class Observer(Protocol):
    """Told each session outcome once, as the pump performs the step that had it; `conn` is the
    socket's `Connection` (what the backend built for it)."""

    def session_accepted(self, conn: connection.Connection, outcome: connection.Accepted) -> None:
        """A session started: `session.started` was sent, or relayed from an upstream."""

    def session_refused(self, conn: connection.Connection, outcome: connection.Refused) -> None:
        """A start was refused; the socket stays open for another."""

    def session_ended(self, conn: connection.Connection, outcome: connection.Ended) -> None:
        """A started session ended (the socket closes, or it was handed over)."""


class Backend(Observer, Protocol):
    """Serves the sessions of one server's live sockets, and observes their outcomes."""

    def refusal(self, headers: Headers | None = None) -> tuple[int, bytes] | None:
        """Why a new socket (its upgrade's `headers`; None: a WebRTC create) is refused before the
        upgrade (HTTP status, JSON body), or None."""

    def connection(self, headers: Headers, now_ns: int, query: Mapping[str, str],
                   media: bool = False) -> connection.Connection:
        """The protocol core of a new socket (its upgrade's `headers` and `query`); `media`: a
        WebRTC call's, whose start may carry a media session's fields (`Connection`'s `media`)."""
        ...

    def start(self, start: connection.Start, peer: Peer) -> Leg | None:
        """Begin `start`; None when it was refused at once (the backend told `peer` why)."""

    def reattach(self, peer: Peer, headers: Headers, query: Mapping[str, str]) -> Leg | None:
        """A socket just opened: the leg of the running session it continues (a pod: the hop's
        `REATTACH_HEADER`, and `peer.conn` is then that session's `Connection`, from `connection`;
        a gateway: the caller's `session_id` query), or None for a socket whose session, if any,
        starts with `session.start`."""
        ...

    @property
    def forks(self) -> bool:
        """Whether this server keeps stored sessions to fork (a gateway with a store): elsewhere
        the fork socket's path is not served (404)."""
        ...

    def fork(self, peer: Peer, session_id: str, webrtc: bool = False) -> None:
        """A fork (`urls.FORK_PATH`: a socket just opened, or a WebRTC fork's call, `webrtc`) not
        read yet (`Peer.await_upstream`): read the stored session `session_id` for the key `peer`
        came with (`connection`'s headers), then `Peer.fork_from` it (its start then forks it), or
        `Peer.close_with` why not; only where `forks`."""
        ...

    def park(self, peer: Peer, leg: Leg) -> bool:
        """`peer`'s socket went away mid-session without the caller's end: whether the backend
        keeps the session running for its caller to re-attach (then the socket lets go of `leg`
        without ending it); False: it ends as the socket's end says."""
        ...


def tell(outcomes: list[connection.Outcome], conn: connection.Connection, observers: tuple[Observer, ...]) -> None:
    """Tell each outcome of a pump's step to every observer, once, by its type; log each end (the
    one `session ended` line, whichever pump, WebSocket or WebRTC, served the session)."""
    for outcome in outcomes:
        if type(outcome) is connection.Accepted:
            for observer in observers:
                observer.session_accepted(conn, outcome)
        elif type(outcome) is connection.Refused:
            for observer in observers:
                observer.session_refused(conn, outcome)
        else:
            for observer in observers:
                observer.session_ended(conn, outcome)
            logger.info("session ended", extra={
                "session_id": outcome.session_id, "reason": outcome.reason, "seconds": outcome.seconds,
                "frames": outcome.frames, "underruns": outcome.underruns, "dropped_samples": outcome.dropped,
                "safety_identifier": outcome.safety_identifier})
