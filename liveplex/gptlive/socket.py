"""The socket pump: reads a WebSocket into `Connection`, performs its actions, writes its events.

One `Pump` per socket, as a raw ASGI handler (no framework layer on the hot path). Three small
loops share it, all on the event loop:

- the reader takes client frames while `Connection.reading` (never while a start is pending, so
  WebSocket backpressure holds the client, gpt-live §2.4);
- the output loop awaits the session's `OutputReceiver.next()`, which the engine thread wakes once
  per tick for every session together (live-contract §4.5), and feeds `Connection.deliver`;
- one `Sweeper` per process is the only timer: it calls `Connection.timer` for the few sockets
  that have a deadline (idle guard, pending start, close grace). Live sessions have none: usage
  events ride on the frame flow.

Everything sent goes through one ordered outbox per socket, written by whichever loop gets there
first (no extra task per message). More than `outbound_max_frames` audio deltas waiting for a slow
client is treated as a disconnect (close 1011). Whatever happens, `run` ends by closing the
session's pipes, so the engine frees the slot at its next tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from liveplex.gptlive import connection, events
from liveplex.gptlive.connection import Connection
from liveplex.live import channel, contract

logger = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

CLOSE_TIMEOUT_S = 1.0
"""How long a final close frame may wait for a stuck client before the transport is dropped."""


class Socket(Protocol):
    """A live socket as the pod sees it: `Pump` (ASGI) or `native.LiveSocket`."""

    def on_timer(self, now_ns: int) -> None:
        """Called by the `Sweeper` while the socket's connection has a deadline."""

    def shutdown(self) -> None:
        """The server is stopping: end the session with `server_shutdown` and close 1001."""


class Sweeper:
    """The front end's one shared timer: fires the deadlines of the sockets that have one."""

    def __init__(self, period_ms: int) -> None:
        self._period_s = period_ms / 1000
        self._pumps: set[Socket] = set()
        self._wake = asyncio.Event()

    def watch(self, pump: Socket) -> None:
        if pump not in self._pumps:
            self._pumps.add(pump)
            self._wake.set()

    def unwatch(self, pump: Socket) -> None:
        self._pumps.discard(pump)

    async def run(self) -> None:
        """Sleep while no socket has a deadline; otherwise sweep every period."""
        while True:
            if not self._pumps:
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(self._period_s)
            now = time.monotonic_ns()
            for pump in list(self._pumps):
                pump.on_timer(now)


@dataclass(frozen=True, slots=True)
class _CloseMark:
    code: int


class Pump:
    """One socket: the glue between ASGI messages, `Connection` and the engine's pipes."""

    def __init__(self, receive: Receive, send: Send, conn: Connection,
                 handle: channel.LiveHandle, sweeper: Sweeper, max_frames: int) -> None:
        self.conn = conn
        self._receive = receive
        self._send = send
        self._handle = handle
        self._sweeper = sweeper
        self._max_frames = max_frames
        self._out: deque[tuple[str, bool] | _CloseMark] = deque()
        self._out_frames = 0
        self._flushing = False
        self._close_code: int | None = None
        """A close frame is queued or owed; nothing more is queued after it."""
        self._close_sent = False
        self._opened: channel.Opened | None = None
        self._outputs: asyncio.Task[None] | None = None
        self._kicked: asyncio.Task[None] | None = None
        self._readable = asyncio.Event()
        self._readable.set()
        self._done = asyncio.Event()

    # --- the handler ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the socket until the session and the socket are over; always hangs up."""
        reader = asyncio.create_task(self._read())
        try:
            self._track()
            await self._done.wait()
            if self._close_code is not None and not self._close_sent:
                self._out.clear()
                try:
                    await asyncio.wait_for(self._send_close(self._close_code), CLOSE_TIMEOUT_S)
                except (OSError, RuntimeError, TimeoutError):
                    pass  # returning drops the transport
        finally:
            self._release()
            self._sweeper.unwatch(self)
            for task in (reader, self._outputs, self._kicked):
                if task is not None and task is not asyncio.current_task():
                    task.cancel()
            await asyncio.gather(*(t for t in (reader, self._kicked) if t is not None),
                                 return_exceptions=True)

    async def _read(self) -> None:
        try:
            while not self._done.is_set():
                if not self.conn.reading:
                    await self._readable.wait()
                    continue
                message = await self._receive()
                if message["type"] == "websocket.disconnect":
                    self.perform(self.conn.disconnect())
                    self._done.set()
                    return
                data = message.get("text")
                if data is None:
                    data = message.get("bytes") or b""
                self.perform(self.conn.receive(data, time.monotonic_ns(), time.time()))
                await self.flush()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.error("socket reader failed", exc_info=True)
            self._fail()

    async def _deliver(self, opened: channel.Opened) -> None:
        try:
            while self._opened is opened:
                outputs = await opened.output.next()
                self.perform(self.conn.deliver(outputs))
                await self.flush()
                if not outputs:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.error("socket output loop failed", exc_info=True)
            self._fail()

    def on_timer(self, now_ns: int) -> None:
        """Called by the `Sweeper`."""
        self.perform(self.conn.timer(now_ns))
        self._kick()

    def shutdown(self) -> None:
        """The server is stopping: end the session with `server_shutdown` and close 1001."""
        self.perform(self.conn.shutdown())
        self._kick()

    # --- actions ----------------------------------------------------------------------------------

    def perform(self, actions: list[connection.Action]) -> None:
        """Do what `Connection` asked, in order; sends are queued for `flush`."""
        for action in actions:
            kind = type(action)
            if kind is connection.Send:
                if self._close_code is None:
                    self._out.append((events.dump(action.event), action.frame))
                    self._out_frames += action.frame
            elif kind is connection.Append:
                if self._opened is not None:
                    self._opened.audio.send(action.pcm)
            elif kind is connection.Start:
                self._start(action.session)
            elif kind is connection.Hangup:
                if self._opened is not None:
                    self._opened.audio.close()
            elif kind is connection.Release:
                self._release()
            elif kind is connection.Close:
                if self._close_code is None:
                    self._close_code = action.code
                    self._out.append(_CloseMark(action.code))
        if self._out_frames > self._max_frames and self._close_code is None:
            logger.warning("client too slow; dropping it", extra={"queued_frames": self._out_frames})
            self._out.clear()
            self._out_frames = 0
            self.conn.disconnect()
            self._release()
            self._close_code = connection.INTERNAL_ERROR
            self._done.set()
        self._track()

    def _start(self, session: contract.Session) -> None:
        result = self._handle.start(session)
        if isinstance(result, channel.Rejected):
            self.perform(self.conn.rejected(result))
            return
        self._opened = result
        self._outputs = asyncio.create_task(self._deliver(result))

    def _release(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            opened.audio.close()
            opened.output.close()
        task, self._outputs = self._outputs, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _fail(self) -> None:
        """A handler bug: hang up, close 1011."""
        self.conn.disconnect()
        self._release()
        if self._close_code is None:
            self._close_code = connection.INTERNAL_ERROR
        self._done.set()

    def _track(self) -> None:
        if self.conn.deadline_ns is None:
            self._sweeper.unwatch(self)
        else:
            self._sweeper.watch(self)
        if self.conn.reading or self._done.is_set():
            self._readable.set()
        else:
            self._readable.clear()

    # --- writing ----------------------------------------------------------------------------------

    def _kick(self) -> None:
        """Flush from a synchronous caller (the sweeper): one short task, only when needed."""
        if self._out and not self._flushing and (self._kicked is None or self._kicked.done()):
            self._kicked = asyncio.create_task(self.flush())

    async def flush(self) -> None:
        """Write the outbox in order; only one writer at a time, the others return at once."""
        if self._flushing:
            return
        self._flushing = True
        try:
            while self._out:
                item = self._out.popleft()
                if type(item) is _CloseMark:
                    self._out.clear()
                    await self._send_close(item.code)
                    self._done.set()
                    return
                text, frame = item
                self._out_frames -= frame
                await self._send({"type": "websocket.send", "text": text})
        except OSError:  # the client is gone (uvicorn's ClientDisconnected)
            self.perform(self.conn.disconnect())
            self._out.clear()
            self._done.set()
        finally:
            self._flushing = False

    async def _send_close(self, code: int) -> None:
        self._close_sent = True
        await self._send({"type": "websocket.close", "code": code})
