"""One raw WebSocket to the server under test, every received frame validated strictly.

The I/O shell around `frames.FrameValidator`: a reader task receives each frame as it arrives,
stamps it with the loop clock (timing checks measure arrival, not consumption), validates it, logs
it and queues it. Checks then consume events in order; a frame that breaks a rule fails the check
when it is reached, and is also recorded in the run's `Ledger` for check 38.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import socket
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection, connect

from liveplex.conformance import frames, signals
from liveplex.conformance.checklist import Failed, expect

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-live-1"
"""In every server's default allow-list (gpt-live §5.1), so the checks work against any engine."""

STREAM_TYPES = frozenset({
    frames.AUDIO_DELTA, "session.output_transcript.delta", "session.usage.updated", "info",
})
"""Events that flow on their own; `next_event` steps over them to reach replies."""

Json = dict[str, Any]
"""A server event as it arrived: its frame passed `frames.validate`, so the checks index into it
as the SDK's schema has it (a wrong shape there is the server's failure, raised as the check's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Received:
    """One valid event and when it arrived (loop clock, seconds)."""

    at: float
    event: Json


@dataclasses.dataclass(frozen=True, slots=True)
class _Broken:
    problems: tuple[frames.Problem, ...]
    excerpt: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Ended:
    code: int | None


class NoEvent(Failed):
    """Nothing arrived in time."""


@dataclasses.dataclass(slots=True)
class Ledger:
    """What every socket of the run received: frame counts and broken rules (checks 27, 38)."""

    sockets: int = 0
    frames: int = 0
    problems: list[tuple[int, frames.Problem, str]] = dataclasses.field(default_factory=list)
    """(check number, problem, frame excerpt)."""


class Wire:
    """A GPT-Live socket driven by hand. Use `async with Wire.open(...) as wire`."""

    def __init__(self, ws: ClientConnection, ledger: Ledger, check: int, reply_timeout_s: float,
                 dialled: float, closed: Callable[[], None] | None = None) -> None:
        self.ws = ws
        self.dialled = dialled
        """The loop time the connection was begun: whatever the server times from accepting it
        (its idle guard) started no earlier, however long the handshake took on a busy machine."""
        self._closed = closed
        self.log: list[Received] = []
        """Every valid event received so far, in order."""
        self.deltas: list[Received] = []
        """The audio deltas among them."""
        self.close_code: int | None = None
        """The close code once the socket has ended (1006 when no close frame came)."""
        self.reply_timeout_s = reply_timeout_s
        self._ledger = ledger
        self._check = check
        self._validator = frames.FrameValidator()
        self._queue: asyncio.Queue[Received | _Broken | _Ended] = asyncio.Queue()
        self._ended = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self._ids = 0
        ledger.sockets += 1

    @classmethod
    async def open(cls, url: str, headers: dict[str, str], ledger: Ledger, check: int,
                   reply_timeout_s: float, closed: Callable[[], None] | None = None) -> Wire:
        """Connect the way the SDK does: no subprotocol, no compression, no size limit; `closed`
        is called once the socket is closed."""
        dialled = asyncio.get_running_loop().time()
        ws = await connect(url, additional_headers=headers, compression=None, max_size=None,
                           user_agent_header=None, open_timeout=reply_timeout_s)
        return cls(ws, ledger, check, reply_timeout_s, dialled, closed)

    async def __aenter__(self) -> Wire:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            await self.ws.close()
            self._reader.cancel()
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        finally:
            if self._closed is not None:
                self._closed()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for frame in self.ws:
                at = loop.time()
                verdict = self._validator.check(frame)
                self._ledger.frames += 1
                if not verdict.ok:
                    excerpt = (frame if isinstance(frame, str) else repr(frame))[:300]
                    self._ledger.problems += [(self._check, p, excerpt) for p in verdict.problems]
                    self._queue.put_nowait(_Broken(verdict.problems, excerpt))
                    continue
                received = Received(at, verdict.event or {})
                self.log.append(received)
                if received.event.get("type") == frames.AUDIO_DELTA:
                    self.deltas.append(received)
                self._queue.put_nowait(received)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code
            self._ended.set()
            self._queue.put_nowait(_Ended(self.close_code))

    # -- sending ---------------------------------------------------------------------------------

    def new_id(self, prefix: str = "chk") -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    async def send(self, event: dict[str, object]) -> None:
        await self.ws.send(json.dumps(event))

    async def send_raw(self, data: str | bytes) -> None:
        await self.ws.send(data)

    async def send_together(self, *events: dict[str, object]) -> None:
        """Send `events` corked, so they leave in one segment: a check of what the server does
        between two events (a close still closing) must not hang on this process being scheduled
        between the writes, which a starved machine may not do for a whole tick."""
        sock = self.ws.transport.get_extra_info("socket")
        cork = getattr(socket, "TCP_CORK", None)  # Linux's; elsewhere the writes go one by one
        if cork is not None and sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, cork, 1)
        try:
            for event in events:
                await self.send(event)
        finally:
            if cork is not None and sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, cork, 0)

    async def append(self, pcm: bytes, event_id: str | None = None) -> None:
        event: dict[str, object] = {"type": "session.input_audio.append", "audio": signals.b64(pcm)}
        if event_id is not None:
            event["event_id"] = event_id
        await self.send(event)

    async def play(self, pcm: bytes, *, chunk_ms: int = signals.FRAME_MS,
                   bytes_per_ms: int = signals.BYTES_PER_MS) -> None:
        """Append `pcm` in `chunk_ms` chunks at real-time pace (absolute deadlines, no drift)."""
        loop = asyncio.get_running_loop()
        step = chunk_ms * bytes_per_ms
        t0 = loop.time()
        for i, offset in enumerate(range(0, len(pcm), step)):
            delay = t0 + i * chunk_ms / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.append(pcm[offset:offset + step])

    # -- receiving -------------------------------------------------------------------------------

    async def recv(self, timeout_s: float | None = None) -> Received:
        """The next valid event; fails on a broken frame, a closed socket or a timeout."""
        timeout_s = self.reply_timeout_s if timeout_s is None else timeout_s
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout_s)
        except TimeoutError:
            raise NoEvent(f"no event within {timeout_s:g} s") from None
        if isinstance(item, _Broken):
            raise Failed(f"invalid server frame: {'; '.join(map(str, item.problems))}; frame: {item.excerpt}")
        if isinstance(item, _Ended):
            self._queue.put_nowait(item)
            raise Failed(f"socket closed (code {item.code}) while waiting for an event")
        return item

    async def next_event(self, timeout_s: float | None = None) -> Json:
        """The next event that is not audio, transcript, usage or info: a reply or a terminal event."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.reply_timeout_s if timeout_s is None else timeout_s)
        while True:
            received = await self.recv(max(0.0, deadline - loop.time()))
            if received.event.get("type") not in STREAM_TYPES:
                return received.event

    async def expect(self, type_: str, *, client_event_id: str | None = None,
                     timeout_s: float | None = None) -> Json:
        """The next reply must be `type_` (echoing `client_event_id` when given)."""
        event = await self.next_event(timeout_s)
        expect(event.get("type") == type_, f"expected {type_}, got {brief(event)}")
        if client_event_id is not None:
            expect(event.get("client_event_id") == client_event_id,
                   f"{type_} should echo client_event_id {client_event_id!r}: {brief(event)}")
        return event

    async def expect_error(self, code: str, param: str | None, *, client_event_id: str | None = None,
                           error_type: str = "invalid_request_error",
                           message_contains: str | None = None) -> Json:
        """The next reply must be an `error` with this code, param and echo (gpt-live §8.1)."""
        event = await self.next_event()
        sent = f"error {code} (param {param!r})"
        expect(event.get("type") == "error", f"expected {sent}, got {brief(event)}")
        body = event["error"]
        assert isinstance(body, dict)
        got = (body.get("type"), body.get("code"), body.get("param"))
        expect(got == (error_type, code, param),
               f"expected {sent} of type {error_type}, got {got}: {brief(event)}")
        expect(event.get("client_event_id") == client_event_id,
               f"error {code} should echo client_event_id {client_event_id!r}: {brief(event)}")
        if message_contains is not None:
            expect(message_contains in str(body.get("message")),
                   f"error message should contain {message_contains!r}: {body.get('message')!r}")
        return event

    async def start(self, session: Mapping[str, object] | None = None,
                    event_id: str | None = "start") -> Json:
        """Send `session.start` and require `session.started`; returns the started event."""
        event: dict[str, object] = {"type": "session.start", "session": session or {"model": DEFAULT_MODEL}}
        if event_id is not None:
            event["event_id"] = event_id
        await self.send(event)
        return await self.expect("session.started", client_event_id=event_id)

    def arrival(self, event: Json) -> float:
        """When `event` (one this socket returned) arrived, on the loop clock."""
        return next(received.at for received in reversed(self.log) if received.event is event)

    async def assert_open(self) -> None:
        """Prove the socket still answers (gpt-live §14 "open"): an unknown event gets `unknown_event`."""
        probe = self.new_id("open")
        await self.send({"type": "liveplex.check.probe", "event_id": probe})
        await self.expect_error("unknown_event", "type", client_event_id=probe)

    async def assert_quiet(self, seconds: float) -> None:
        """No reply (anything but stream events) arrives for `seconds`."""
        try:
            event = await self.next_event(seconds)
        except NoEvent:
            return
        raise Failed(f"expected no reply for {seconds:g} s, got {brief(event)}")

    async def close_session(self, event_id: str | None = "close") -> Json:
        """Send `session.close` and require `session.closed` `close_requested`, then close 1000."""
        event: dict[str, object] = {"type": "session.close"}
        if event_id is not None:
            event["event_id"] = event_id
        await self.send(event)
        closed = await self.expect("session.closed", client_event_id=event_id)
        expect(closed.get("reason") == "close_requested", f"close reason: {brief(closed)}")
        code = await self.ended(self.reply_timeout_s)
        expect(code == 1000, f"after session.closed the socket should close 1000, got {code}")
        return closed

    async def ended(self, timeout_s: float) -> int | None:
        """Wait for the socket to end, failing on any reply or broken frame meanwhile; the close code."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                item = await asyncio.wait_for(self._queue.get(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise Failed(f"socket still open {timeout_s:g} s later") from None
            if isinstance(item, _Ended):
                self._queue.put_nowait(item)
                return item.code
            if isinstance(item, _Broken):
                raise Failed(f"invalid server frame: {'; '.join(map(str, item.problems))}; frame: {item.excerpt}")
            if item.event.get("type") not in STREAM_TYPES:
                raise Failed(f"unexpected event before the socket closed: {brief(item.event)}")

    @property
    def has_ended(self) -> bool:
        return self._ended.is_set()


def brief(event: dict[str, object]) -> str:
    """An event for a failure message, with long base64 cut short."""
    text = json.dumps(event)
    return text if len(text) <= 400 else text[:400] + "…"


