"""`Parked`: a relayed session whose socket dropped without the caller's end, kept running for the
grace window so that its caller can re-attach through any gateway (docs/continuity.md "Re-attach").

It stands in for the socket as the session's `backend.Peer`: the engine goes on ticking (no caller
audio arrives, so the model hears silence), its outputs go through the session's own `Connection`
as before (usage, transcripts, the end at `max_seconds`), and what the socket would have sent is
kept in the session's `Replay` for the caller who comes back. When the window passes, or the
session ends meanwhile, it ends exactly as a dropped socket's session ends today.
"""

from __future__ import annotations

import asyncio
import logging
import time

from liveplex.gptlive import connection, events, fork
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server import backend, hop
from liveplex.gptlive.server.front import Front
from liveplex.gptlive.server.replay import Replay
from liveplex.live import contract

logger = logging.getLogger(__name__)


class Parked:
    """See the module docstring; `end` is called once, when the session is over for good."""

    def __init__(self, conn: connection.Connection, leg: backend.Leg, replay: Replay, front: Front,
                 observers: tuple[backend.Observer, ...], grace_s: float) -> None:
        self.conn = conn
        self.leg = leg
        self.replay: Replay | None = replay
        self._front = front
        self._observers = observers
        self.dispatched = 0
        self.parked_ns = time.monotonic_ns()
        self.over = False
        replay.parked()
        self._timer = asyncio.get_running_loop().call_later(grace_s, self._window_passed)
        front.join(self)  # one of the server's sessions: a drain's deadline and a stop end it too

    def _window_passed(self) -> None:
        logger.info("parked session ended: no caller re-attached", extra={"session_id": self.session_id})
        self._perform(self.conn.disconnect())

    @property
    def session_id(self) -> str | None:
        resource = self.conn.resource
        return None if resource is None else resource.id

    def unpark(self) -> None:
        """A caller re-attached: the session is a socket's again."""
        self._timer.cancel()
        self.over = True
        self._front.leave(self)

    # --- sweeper.Socket: the front's, as its live sockets are ------------------------------------------

    def shutdown(self) -> None:
        """The pod stops (a drain's deadline, or the process): the session ends as a socket's does."""
        if not self.over:
            self._perform(self.conn.shutdown())

    def on_timer(self, now_ns: int) -> None:
        """Never watched: a live session has no deadline."""

    def _perform(self, commands: list[connection.Command]) -> None:
        if self.conn.outcomes:
            outcomes = self.conn.outcomes.copy()
            self.conn.outcomes.clear()
            backend.tell(outcomes, self.conn, self._observers)
        for command in commands:
            if type(command) is connection.Send:
                if not command.frame and self.replay is not None:
                    self.replay.keep(command.event, events.dump(command.event))
            elif type(command) is connection.Release or type(command) is connection.Close:
                self._end()

    def _end(self) -> None:
        if not self.over:
            self.over = True
            self._timer.cancel()
            self._front.leave(self)
            self.leg.release()

    # --- backend.Peer: the engine's side, while no socket holds the session ---------------------------

    def reached(self, messages: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)  # no socket: nothing is on its way
        return future

    def freeze(self) -> int:
        return self.dispatched

    def refuse(self, error: ProtocolError | None) -> None:
        raise RuntimeError("a parked session has started")

    def deliver(self, outputs: list[contract.Output]) -> None:
        self._perform(self.conn.deliver(outputs))

    def handed_over(self) -> None:
        self._perform(self.conn.handed_over(hop.HANDED_OVER_CLOSE))

    def handed_off(self, expires_at: int | None, frames: int = 0) -> None:
        raise RuntimeError("a pod's session is not handed off")

    def send_verbatim(self, text: str, frame: bool) -> None:
        """The hop's words (a checkpoint, a move request) have nobody to go to: the leg keeps the
        record, and a draining pod asks the re-attached socket again."""

    def passthrough_ended(self, reason: str, code: int) -> None:
        raise RuntimeError("a pod's session is not relayed")

    def passthrough_lost(self, why: str) -> None:
        raise RuntimeError("a pod's session is not relayed")

    def taken_over(self) -> None:
        self.unpark()

    client_config = None

    @property
    def reconnects(self) -> bool:
        return False

    def hand_back(self) -> bool:
        return False

    def await_upstream(self) -> None:
        raise RuntimeError("a pod's session has no upstream")

    def fork_from(self, source: fork.Source) -> None:
        raise RuntimeError("a pod forks nothing")

    def close_with(self, error: ProtocolError, code: int) -> None:
        raise RuntimeError("a parked session has no socket to close")
