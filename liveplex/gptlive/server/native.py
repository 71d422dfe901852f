"""The native live socket: `/v1/live/sessions` served on uvicorn's transport without ASGI.

`LiveProtocol` is uvicorn's sans-I/O WebSocket protocol (`uvicorn.Config(ws=LiveProtocol)`) with
one path taken out of ASGI: a handshake for `/v1/live/sessions` on a server whose lifespan
published its front end (`FRONT` in the lifespan state) is answered here, and `LiveSocket` drives
the socket's `Connection` by push, with no task and no await per frame (performance.md §3.6):

- client frames parsed in `data_received` go straight into `Connection.receive` (or, for a session
  relayed by the gateway, to the upstream verbatim: from the hand-off on, `passthrough.Passthrough` is the
  socket's machine); while a start is pending the transport stops reading and frames already
  parsed wait in a backlog, so backpressure holds the client (gpt-live §2.4);
- the backend (`backend.Backend`: a pod's engine, the gateway's upstream) answers through its
  `backend.Peer`; a pod's engine calls every session's output listener once per tick;
- each step's outcomes are told to the observers (`FrontStats`, the backend) once, before its
  commands are performed (`backend` documents why);
- sends are websockets' `send_text` and one `transport.write` per batch of actions. While the
  transport's write buffer is over its high-water mark, sends wait in order in a held queue;
  more than `outbound_max_frames` audio deltas or `outbound_max_bytes` bytes of events held is a
  disconnect (close 1011, the reason says which; the transport is aborted `DROP_GRACE_S` later);
- a keepalive ping left unanswered aborts the transport (uvicorn closes it, which waits for a
  send buffer a non-reading client never drains, so its descriptor stayed open); so does the
  answer to a client's close frame still unsent after uvicorn's close timeout. A gateway's socket
  (`hop.SESSION_ID_HEADER`) is pinged every `hop.PING_INTERVAL_S`, and a pong missing for
  `hop.PING_TIMEOUT_S` parks its session where the backend keeps it (a wedged gateway,
  docs/continuity.md "Re-attach"): the socket closes with `hop.SILENT_CLOSE` after what was written;
- the server's one `Sweeper` fires the deadlines.

Every other path (404s, the demo, other upgrade paths) goes through the ASGI app unchanged.
`LiveProtocol` subclasses uvicorn internals: uvicorn is pinned to the range this is tested with.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any
from urllib import parse

from uvicorn.protocols.websockets.websockets_sansio_impl import (
    STATUS_PHRASES,
    WebSocketsSansIOProtocol,
)
from websockets.datastructures import Headers
from websockets.frames import Close
from websockets.http11 import Request, Response
from websockets.protocol import State

from liveplex.gptlive import connection, events, urls
from liveplex.gptlive.server import auth, backend, hop, passthrough, replies
from liveplex.gptlive.server.front import FRONT, Front
from liveplex.gptlive.server.peer import PeerCore

if TYPE_CHECKING:
    from websockets.frames import Frame

logger = logging.getLogger(__name__)

DROP_GRACE_S = 1.0
"""A client dropped for being slow has this long to read the close frame before the abort."""

class LiveProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol with the live path served by `LiveSocket`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.live: LiveSocket | None = None

    def handle_connect(self, event: Request) -> None:
        front: Front | None = self.app_state.get(FRONT)
        path = event.path.partition("?")[0]
        fork_of = urls.fork_source(path) if front is not None and front.backend.forks else None
        if front is None or (path != urls.LIVE_PATH and fork_of is None):
            super().handle_connect(event)
            return
        self.request = event
        self.handshake_initiated = True
        try:
            refusal = front.refusal(event.headers, self.server)
        except Exception:  # never an exception out of an upgrade: it left the connection counted for good
            logger.error("live upgrade check failed", exc_info=True)
            refusal = replies.INTERNAL
        if refusal is not None:
            status, body = refusal
            self._answer(Response(status, STATUS_PHRASES[status], Headers([
                ("Date", email.utils.formatdate(usegmt=True)), ("Connection", "close"),
                ("Content-Length", str(len(body))), ("Content-Type", "application/json"),
            ]), body))
            return
        self.response = self.conn.accept(event)
        if self.response.status_code != 101:
            self._answer(self.response)
            return
        del self.response.headers["Date"]
        self.response.headers.update([(n.decode("latin-1").lower(), v.decode("latin-1"))
                                      for n, v in self.default_headers])
        if auth.PAGE_SUBPROTOCOL in (auth.subprotocols(event.headers.get_all("sec-websocket-protocol")) or ()):
            self.response.headers["Sec-WebSocket-Protocol"] = auth.PAGE_SUBPROTOCOL
        self.handshake_complete = True
        self.conn.send_response(self.response)
        self.transport.write(b"".join(self.conn.data_to_send()))
        if hop.SESSION_ID_HEADER in event.headers:  # a gateway's socket: a wedged one is found in seconds
            self.ping_interval, self.ping_timeout = hop.PING_INTERVAL_S, hop.PING_TIMEOUT_S
        self.start_keepalive()
        self.live = LiveSocket(self, front, event.headers, dict(parse.parse_qsl(parse.urlsplit(event.path).query)),
                               fork_of)

    def _answer(self, response: Response) -> None:
        """An HTTP answer instead of an upgrade; the connection ends with it."""
        self.handshake_complete = True
        self.close_sent = True
        self.conn.send_response(response)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.transport.close()

    def send_receive_event_to_app(self) -> None:
        live = self.live
        if live is None:
            super().send_receive_event_to_app()
            return
        data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
        self.frames = []
        if self.close_sent:
            return
        if self.curr_msg_data_type == "text":
            try:
                live.receive(data.decode())
            except UnicodeDecodeError:
                self.conn.send_close(1007)
                self.handle_parser_exception()
        else:
            live.receive(bytes(data))

    def handle_close(self, event: Frame) -> None:
        if self.live is not None:
            self.live.lost(Close.parse(bytes(event.data)).code if event.data else None)
        super().handle_close(event)
        self._abort_later()

    def handle_parser_exception(self) -> None:
        if self.live is not None:
            self.live.lost()
        super().handle_parser_exception()
        self._abort_later()

    def _abort_later(self) -> None:
        """uvicorn answered the client's close (or its broken frame) by closing the transport,
        which waits for the send buffer to drain: a client that reads nothing more kept its
        descriptor forever. It is aborted after the close timeout (`connection_lost` cancels)."""
        if self.close_timer is None and not self.disconnected:
            self.close_timer = self.loop.call_later(self.close_timeout, self.transport.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.live is not None:
            self.live.lost()
        super().connection_lost(exc)

    def keepalive_timeout(self) -> None:
        """No pong: a session the backend parks closes with `hop.SILENT_CLOSE` (`LiveSocket.silent`);
        any other connection is aborted, since uvicorn's close waits for a send buffer a
        non-reading client never drains (counted as dropped: a parked session is the backend's
        to count, as it goes on)."""
        if self.live is not None and self.live.silent():
            self.pong_timer = None
            return
        front: Front | None = self.app_state.get(FRONT)
        if front is not None:
            front.stats.dropped["ping_timeout"] += 1
        super().keepalive_timeout()
        self.transport.abort()

    async def send(self, message: Any) -> None:
        """An ASGI refusal (the 404 upgrades) completes the handshake too: uvicorn does not note it, and
        would log `ASGI callable returned without completing handshake` for every probe."""
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True

    def shutdown(self) -> None:
        """The server is stopping: a live session ends with `server_shutdown` and close 1001."""
        if self.live is not None:
            self.live.shutdown()
        super().shutdown()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.live is not None:
            self.live.writable = False

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.live is not None:
            self.live.drained()


class LiveSocket(PeerCore):
    """One live socket: performs its protocol machine's steps on the protocol, synchronously."""

    def __init__(self, proto: LiveProtocol, front: Front, headers: Headers, query: dict[str, str],
                 fork_of: str | None = None) -> None:
        assert front.sweeper is not None  # checked by refusal()
        super().__init__(front.backend.connection(headers, time.monotonic_ns(), query))
        self._proto = proto
        self._ws = proto.conn
        self._transport = proto.transport
        self._front = front
        self._backend = front.backend
        self._stats = front.stats
        self._sweeper = front.sweeper
        self._max_frames = front.settings.outbound_max_frames
        self._max_bytes = front.settings.outbound_max_bytes
        self.writable = True
        """False while the transport's write buffer is over its high-water mark."""
        self._held: deque[tuple[bytes, bool]] = deque()
        self._held_frames = 0
        self.held_bytes = 0
        """Bytes of events waiting for the transport (what a slow client costs the server)."""
        self._draining = False
        self._read_paused = False
        self._leg: backend.Leg | None = None
        self._start_ns = 0
        """When the pending or running session's valid `session.start` was taken (0: none)."""
        self._awaiting_audio = False
        """Started and no audio delta sent yet: the next one is the first (`first_audio_seconds`)."""
        self._done = False
        front.join(self)
        self._stats.sockets_open += 1
        if fork_of is None:
            self._leg = self._backend.reattach(self, headers, query)
        else:  # the fork socket: its start waits for the stored session (`Backend.fork`)
            self.await_upstream()
            self._backend.fork(self, fork_of)
        self._track()

    # --- inputs -----------------------------------------------------------------------------------

    def receive(self, data: str | bytes) -> None:
        """One client message, parsed by the protocol."""
        if self._done or self._frozen:
            return
        if self._backlog or not self._machine.reading:
            self._backlog.append(data)
            self._track()
            return
        self._dispatch(data)

    def _dispatch(self, data: str | bytes) -> None:
        """A message to the protocol, or verbatim to the upstream of a relayed session."""
        self._counted()
        if self._passthrough is not None:
            if self._leg is not None:
                self._leg.forward(data)
            return
        try:
            self._perform(self.conn.receive(data, time.monotonic_ns(), time.time()))
        except Exception:
            logger.error("live socket receive failed", exc_info=True)
            self._fail()

    def on_timer(self, now_ns: int) -> None:
        """Called by the `Sweeper`."""
        self._perform(self.conn.timer(now_ns))

    def shutdown(self) -> None:
        """The server is stopping: end the session with `server_shutdown` and close 1001."""
        if not self._done:
            self._perform(self._machine.shutdown())

    def lost(self, code: int | None = None) -> None:
        """The client closed (with `code`) or vanished (None). A session it left without its end
        (any code but the hop's `ENDS_SESSION_CLOSE`) may be kept by the backend for the caller
        to re-attach (`Backend.park`); else it ends here."""
        if self._done:
            return
        leg = self._leg
        if leg is not None and code != hop.ENDS_SESSION_CLOSE and self._backend.park(self, leg):
            self._leg = None  # the backend holds it now: nothing of it is released here
        else:
            self._perform(self._machine.disconnect())
        self._finish()

    def silent(self) -> bool:
        """The keepalive ping went unanswered. If the backend parks the session (a pod's, for the
        gateway that relays it: wedged), the socket closes with `hop.SILENT_CLOSE` after what was
        written, so that a gateway that comes back reads it, and the transport is aborted after the
        close timeout; True. False: the connection is dropped as any silent one."""
        leg = self._leg
        if self._done or leg is None or not self._backend.park(self, leg):
            return False
        self._leg = None  # the backend holds it now: nothing of it is released here
        self._close(hop.SILENT_CLOSE, "no pong: the session is parked for its caller")
        return True

    def taken_over(self) -> None:
        """The session went on on another socket: let go of it, close with `TAKEN_OVER_CLOSE`."""
        if not self._done:
            self._leg = None
            self._close(hop.TAKEN_OVER_CLOSE, "the session continued on another connection")

    def drained(self) -> None:
        """The write buffer went below its low-water mark: send what was held, in order."""
        self.writable = True
        if self._held and self._open():
            while self._held:
                self._ws.send_text(self._held.popleft()[0])
            self._held_frames = self.held_bytes = 0
            self._write()

    # --- steps ------------------------------------------------------------------------------------

    def _perform(self, commands: list[connection.Command]) -> None:
        """Tell the outcomes of the machine's step, then do its commands in order; sends are
        written in one go at the end (a batch without sends or a close writes nothing: backends
        that send perform their own batch)."""
        if self._machine.outcomes:
            self._settle(self._machine)
        close_code: int | None = None
        sent = False
        for command in commands:
            if type(command) is connection.Append:  # caller audio, four per frame sent: tested first
                if self._leg is not None:
                    self._leg.append(command.pcm)
            elif type(command) is connection.Send:
                sent = True
                text = events.dump(command.event)
                self._send(text, command.frame)
                if not command.frame:
                    self._stats.sent(command.event)
                    if self.replay is not None:
                        self.replay.keep(command.event, text)
            elif type(command) is connection.Start:
                self._start_ns = time.monotonic_ns()
                self._leg = self._backend.start(command, self)
            elif type(command) is connection.Say:
                if self._leg is not None:
                    self._leg.say(command.text)
            elif type(command) is connection.Hangup:
                if self._leg is not None:
                    self._leg.hangup()
            elif type(command) is connection.Release:
                self._release()
            elif type(command) is connection.Close:
                close_code = command.code
        if sent or close_code is not None:
            self._flush(close_code)
        self._track()

    # --- what the backend tells (`backend.Peer`) -------------------------------------------------------

    def handed_off(self, expires_at: int | None, frames: int = 0) -> None:
        super().handed_off(expires_at, frames)
        self._track()

    def send_verbatim(self, text: str, frame: bool) -> None:
        """One frame an upstream wrote, sent verbatim (the gateway's relay); audio deltas are
        counted here, the one count of a relayed session's usage, whoever ends it."""
        if self._done:
            return
        passing = self._passthrough
        if frame and passing is not None:
            passing.frames += 1
        self._send(text, frame)
        self._flush(None)

    def _flush(self, close_code: int | None) -> None:
        """Write what was sent, or close with `close_code`; a client over its limits is dropped."""
        if self._held_frames > self._max_frames or self.held_bytes > self._max_bytes:
            self._drop()
        elif close_code is not None:
            self._close(close_code)
        else:
            self._write()

    def _drop(self) -> None:
        """A client too far behind is gone: what is held is discarded, the session hung up, close
        1011 with the reason, and the transport aborted if the client does not read it."""
        if self._held_frames > self._max_frames:
            kind, why = "slow_frames", f"more than {self._max_frames} audio frames queued"
        else:
            kind, why = "slow_bytes", f"more than {self._max_bytes} bytes queued"
        logger.warning("client too slow; dropping it", extra={
            "reason": why, "held_frames": self._held_frames, "held_bytes": self.held_bytes})
        self._stats.dropped[kind] += 1
        self._held.clear()
        self._held_frames = self.held_bytes = 0
        self._hang_up()
        self._close(connection.INTERNAL_ERROR, f"client too slow: {why}", DROP_GRACE_S)

    def _send(self, text: str, frame: bool) -> None:
        if frame and self._awaiting_audio:
            self._awaiting_audio = False
            self._stats.first_audio_seconds.observe((time.monotonic_ns() - self._start_ns) / 1e9)
        if not self._open():
            return
        if self.writable and not self._held:
            self._ws.send_text(text.encode())
        else:
            data = text.encode()
            self._held.append((data, frame))
            self._held_frames += frame
            self.held_bytes += len(data)

    def _release(self) -> None:
        leg, self._leg = self._leg, None
        if leg is not None:
            leg.release()

    def _fail(self) -> None:
        """A handler bug: hang up, close 1011."""
        self._hang_up()
        self._close(connection.INTERNAL_ERROR)

    def _hang_up(self) -> None:
        """A disconnect the pump decided itself: its outcomes told, its commands left to the
        close that follows (which releases the session)."""
        self._machine.disconnect()
        self._settle(self._machine)

    def _settle(self, machine: connection.Connection | passthrough.Passthrough | passthrough.Pending) -> None:
        """Tell each outcome `machine` has had since it was last asked to the observers, once (the
        stats and the backend); an end is logged."""
        outcomes = machine.outcomes.copy()
        machine.outcomes.clear()
        if self._start_ns and any(type(outcome) is connection.Accepted for outcome in outcomes):
            self._stats.start_seconds.observe((time.monotonic_ns() - self._start_ns) / 1e9)
            self._awaiting_audio = True
        backend.tell(outcomes, self.conn, (self._stats, self._backend))

    # --- writing ----------------------------------------------------------------------------------

    def _open(self) -> bool:
        return self._ws.state is State.OPEN and not self._transport.is_closing()

    def _write(self) -> None:
        data = self._ws.data_to_send()
        if data and not self._transport.is_closing():
            self._transport.write(b"".join(data))

    def _close(self, code: int, reason: str = "", grace_s: float | None = None) -> None:
        """Everything held, then the close frame; the transport is aborted if the client has not
        answered it after `grace_s` (uvicorn's close timeout by default)."""
        if self._open():
            while self._held:
                self._ws.send_text(self._held.popleft()[0])
            self._ws.send_close(code, reason)
            self._write()
            proto = self._proto
            proto.close_sent = True
            proto.close_timer = proto.loop.call_later(proto.close_timeout if grace_s is None else grace_s,
                                                      self._transport.abort)
        self._finish()

    def _finish(self) -> None:
        """The session is over for this socket: free the engine slot and stop the timer."""
        if self._done:
            return
        self._done = True
        self._release()
        self._held.clear()
        self._held_frames = self.held_bytes = 0
        self._backlog.clear()
        self._sweeper.unwatch(self)
        self._front.leave(self)
        self._stats.sockets_open -= 1
        if self._read_paused:  # read the client's answer to the close frame
            self._read_paused = False
            self._transport.resume_reading()

    def _track(self) -> None:
        """Follow the connection's deadline and reading state; replay the backlog once readable."""
        if self.conn.deadline_ns is None or self._done:
            self._sweeper.unwatch(self)
        else:
            self._sweeper.watch(self)
        if self._done:
            return
        if not self._machine.reading:
            if not self._read_paused:
                self._read_paused = True
                self._transport.pause_reading()
            return
        if self._backlog and not self._draining:
            self._draining = True
            try:
                while self._backlog and self._machine.reading and not self._done:
                    self._dispatch(self._backlog.popleft())
            finally:
                self._draining = False
        if self._read_paused and self._machine.reading and not self._done:
            self._read_paused = False
            self._transport.resume_reading()
