"""`PeerCore`: what a live socket (`native.LiveSocket`) and a WebRTC call (`webrtc.call.Call`)
share as a `backend.Peer`, written once.

Both pump one session's `Connection` (then its `passthrough.Passthrough`, once an upstream that talks to
the client itself started it); they differ in their ends (a WebSocket; RTP and a data channel),
so each performs the machine's commands and tells its outcomes itself (`_perform`, `_settle`).
What the backend calls to step the machine, the count of client messages handed to it (and the
export's wait for it), and the freeze of a leaving session are the same for both: here.
"""

from __future__ import annotations

import abc
import asyncio
from collections import deque
from typing import Any

from liveplex.gptlive import connection, events, fork
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server import hop, passthrough
from liveplex.gptlive.server.replay import Replay
from liveplex.live import contract


class PeerCore(abc.ABC):
    """See the module docstring."""

    def __init__(self, conn: connection.Connection) -> None:
        self.conn = conn
        self._passthrough: passthrough.Passthrough | None = None
        """The session's machine once an upstream that talks to the client itself started it."""
        self._machine: connection.Connection | passthrough.Passthrough | passthrough.Pending = conn
        """The machine the client's own inputs (read, left, shut down) go to: `conn`, then
        `_passthrough` once it is set."""
        self.dispatched = 0
        """Client messages handed to the protocol so far (what a handover's export waits for)."""
        self._reaching: list[tuple[int, asyncio.Future[None]]] = []
        """`reached`'s waiters: (messages, resolved once `dispatched` gets there)."""
        self._frozen = False
        """Set by `freeze`: the session is leaving, client messages are no longer read into it."""
        self._backlog: deque[str | bytes] = deque()
        """Client messages read while the machine was not reading, in order."""
        self.replay: Replay | None = None
        """What this socket sent lately, for a caller who re-attaches (`backend.Peer.replay`)."""

    @abc.abstractmethod
    def _perform(self, commands: list[connection.Command]) -> None:
        """Tell the machine's outcomes, then do its commands on this transport."""

    @abc.abstractmethod
    def _settle(self, machine: connection.Connection | passthrough.Passthrough | passthrough.Pending) -> None:
        """Tell each outcome `machine` has had since it was last asked, once."""

    def _counted(self) -> None:
        """One more client message handed to the protocol (or forwarded upstream)."""
        self.dispatched += 1
        if self._reaching:
            self._reach()

    # --- backend.Peer -----------------------------------------------------------------------------

    def reached(self, messages: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reaching.append((messages, future))
        self._reach()
        return future

    def _reach(self) -> None:
        """Resolve the waiters `dispatched` got to; forget those given up on (cancelled)."""
        waiting = []
        for messages, future in self._reaching:
            if future.done():
                continue
            if self.dispatched >= messages:
                future.set_result(None)
            else:
                waiting.append((messages, future))
        self._reaching = waiting

    def freeze(self) -> int:
        self._frozen = True
        self._backlog.clear()
        return self.dispatched

    def refuse(self, error: ProtocolError | None) -> None:
        self._perform(self.conn.rejected(error))

    def deliver(self, outputs: list[contract.Output]) -> None:
        self._perform(self.conn.deliver(outputs))

    def handed_over(self) -> None:
        self._perform(self.conn.handed_over(hop.HANDED_OVER_CLOSE))

    def handed_off(self, expires_at: int | None, frames: int = 0) -> None:
        handoff = self.conn.started_upstream(expires_at)
        if handoff is not None:
            self._passthrough = self._machine = passthrough.Passthrough(handoff, frames)
        self._settle(self.conn)  # the `Accepted`

    def await_upstream(self) -> None:
        self._machine = passthrough.Pending()

    def fork_from(self, source: fork.Source) -> None:
        self.conn.fork_from(source)
        self._machine = self.conn
        self._perform([])  # read again: what the client sent meanwhile, its start first

    def close_with(self, error: ProtocolError, code: int) -> None:
        self._perform([connection.Send(events.Error(error, None)), connection.Close(code)])

    def passthrough_ended(self, reason: str, code: int) -> None:
        if self._passthrough is not None:
            self._perform(self._passthrough.ended(reason, code))

    client_config: dict[str, Any] | None = None
    """A socket's: it configures no data channel (a WebRTC call sets its own)."""

    @property
    def reconnects(self) -> bool:
        return self._passthrough is not None and not self._passthrough.done

    def hand_back(self) -> bool:
        if self._passthrough is None or not self.reconnects:
            return False
        self._perform(self._passthrough.handed_back())
        return True

    def passthrough_lost(self, why: str) -> None:
        if self._passthrough is not None:
            self._perform(self._passthrough.lost(why))
