"""What the live socket pump asks of whatever serves sessions behind it: a pod's engine, or the
gateway's upstream relay.

The pump (`native.LiveSocket`) owns the client socket: reading, the protocol `Connection`, writes
with backpressure, closing. A `Backend` decides who may connect, builds each socket's `Connection`
(the pod trusts the gateway's session-id header; the gateway mints ids) and starts sessions; each
started session is a `Leg` the pump hands caller audio to. The backend answers through the `Peer`
it was given: `perform` for the protocol's actions, `relay` for frames an upstream already wrote.
"""

from __future__ import annotations

from typing import Protocol

from websockets.datastructures import Headers

from liveplex.gptlive import connection


class Peer(Protocol):
    """The client socket, as a backend sees it."""

    conn: connection.Connection

    def perform(self, actions: list[connection.Action]) -> None:
        """Do what the `Connection` asked, in order."""

    def relay(self, text: str, frame: bool) -> None:
        """Send one frame an upstream server wrote, verbatim; `frame` marks an audio delta."""


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


class Backend(Protocol):
    """Serves the sessions of one server's live sockets."""

    def refusal(self) -> tuple[int, bytes] | None:
        """Why a new socket is refused before the upgrade (HTTP status, JSON body), or None."""

    def connection(self, headers: Headers, now_ns: int) -> connection.Connection:
        """The protocol core of a new socket."""

    def start(self, start: connection.Start, peer: Peer) -> Leg | None:
        """Begin `start`; None when it was refused at once (the backend told `peer` why)."""

    def settled(self, conn: connection.Connection, outcome: connection.Accepted | connection.Refused
                | connection.Ended) -> None:
        """A session outcome the pump performed (a pod tells its pool's Redis at once)."""
