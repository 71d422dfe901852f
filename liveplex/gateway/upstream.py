"""`Upstream`: the gateway's WebSocket to one pod, websockets' sans-I/O client on the loop's transport.

Like the client side (`gptlive.server.native`), it is push-driven, with no task and no await per
frame: `data_received` parses the pod's frames and hands each text message to `on_message` at once,
and `send` frames and writes a client message in place. A relayed audio frame therefore costs one
parse and one write in each direction.

When it ends, `ending` says how, so that only the pod's own faults count against the pod (its
breaker): a close handshake (`CLOSED`, with the pod's `close_code`), a message over
`events.MAX_SERVER_MESSAGE_BYTES` refused here (`TOO_LARGE`: a client made the pod say it), a
broken WebSocket stream (`VIOLATION`), no message for the read deadline (`SILENT`, decided by the
gateway's `Watchdog`), or the transport gone without a close (`LOST`).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping

from websockets.client import ClientProtocol
from websockets.exceptions import PayloadTooBig
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from liveplex.gptlive import events, urls
from liveplex.gptlive.server import hop
from liveplex.gptlive.server.tls import Tls

CLOSE_TIMEOUT_S = 1.0
"""After our close frame, how long the pod gets to answer before the transport is aborted."""


class Ending(enum.Enum):
    """How an upstream ended (see the module docstring)."""

    CLOSED = "closed"
    TOO_LARGE = "too_large"
    VIOLATION = "violation"
    SILENT = "silent"
    LOST = "lost"

    @property
    def pods_fault(self) -> bool:
        """Whether the pod itself failed (its breaker trips), rather than a client or a close."""
        return self in (Ending.VIOLATION, Ending.SILENT, Ending.LOST)


class UpstreamError(Exception):
    """The pod refused the upgrade or went away during it."""


MAX_EARLY_MESSAGES = 256
"""What a pod may send before the gateway listens: a re-attach's opening words and missed events
(`replay.MAX_EVENTS`), with room."""


class Upstream(asyncio.Protocol):
    """One pod connection; `opened` resolves after the handshake, `lost` when the transport goes."""

    def __init__(self, uri: str, headers: Mapping[str, str]) -> None:
        self._conn = ClientProtocol(parse_uri(uri), max_size=events.MAX_SERVER_MESSAGE_BYTES)
        self._headers = headers
        self._transport: asyncio.Transport | None = None
        self._parts: list[bytes] = []
        self._text = True
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        self._on_message: Callable[[str | bytes], None] = self._keep_early
        self._early: list[str | bytes] = []
        """Messages that came with the handshake, before anyone listened (a re-attached session's
        pod speaks first): handed to the first `on_message`."""
        self.received = 0
        """Whole messages from the pod so far (the `Watchdog` reads it)."""
        self.sent = 0
        """Messages written to the pod (what an export waits for it to have read)."""
        self.ending: Ending | None = None
        self.close_code: int | None = None
        """The code of the pod's close frame, once received."""

    @property
    def on_message(self) -> Callable[[str | bytes], None]:
        """Called with every whole message from the pod, in order (those before it was set, first)."""
        return self._on_message

    @on_message.setter
    def on_message(self, handler: Callable[[str | bytes], None]) -> None:
        self._on_message = handler
        early, self._early = self._early, []
        for message in early:
            handler(message)

    def _keep_early(self, message: str | bytes) -> None:
        """The handler until one is set: keep the message for it (a pod that floods a socket nobody
        reads yet is dropped)."""
        if len(self._early) < MAX_EARLY_MESSAGES:
            self._early.append(message)
        else:
            self.abort(Ending.VIOLATION)

    @property
    def write_buffer_bytes(self) -> int:
        return self._transport.get_write_buffer_size() if self._transport else 0

    # --- asyncio.Protocol -----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop: its transport is no asyncio.Transport subclass
        request = self._conn.connect()
        for name, value in self._headers.items():
            request.headers[name] = value
        self._conn.send_request(request)
        self._flush()

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        conn.receive_data(data)
        if conn.parser_exc is not None and self.ending is None:
            self.ending = Ending.TOO_LARGE if isinstance(conn.parser_exc, PayloadTooBig) else Ending.VIOLATION
        for event in conn.events_received():
            if type(event) is Frame:
                self._frame(event)
            elif isinstance(event, Response) and not self.opened.done():
                if conn.handshake_exc is not None:
                    self.opened.set_exception(UpstreamError(f"upgrade refused: {conn.handshake_exc}"))
                else:
                    self.opened.set_result(None)
        self._flush()

    def eof_received(self) -> bool | None:
        self._conn.receive_eof()
        self._flush()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ending is None:
            rcvd = self._conn.close_rcvd
            self.close_code = rcvd.code if rcvd is not None else None
            self.ending = Ending.CLOSED if rcvd is not None else Ending.LOST
        if not self.opened.done():
            self.opened.set_exception(UpstreamError(f"the pod hung up during the upgrade: {exc}"))
        if not self.lost.done():
            self.lost.set_result(None)

    # --- frames ---------------------------------------------------------------------------------------

    def _frame(self, frame: Frame) -> None:
        if frame.opcode is Opcode.TEXT and frame.fin:
            self.received += 1
            self._on_message(str(frame.data, "utf-8"))  # bytes from the reader; typed as any buffer
        elif frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONT):  # fragments: liveplex pods send none
            if frame.opcode is not Opcode.CONT:
                self._text = frame.opcode is Opcode.TEXT
            self._parts.append(bytes(frame.data))
            if frame.fin:
                self.received += 1
                data, self._parts = b"".join(self._parts), []
                self._on_message(data.decode() if self._text else data)

    def send(self, data: str | bytes) -> None:
        """One client message to the pod, verbatim."""
        if self._conn.state is not State.OPEN:
            return
        self.sent += 1
        if isinstance(data, str):
            self._conn.send_text(data.encode())
        else:
            self._conn.send_binary(data)
        self._flush()

    def close(self, code: int = hop.ENDS_SESSION_CLOSE) -> None:
        """Close politely, by default with the code that ends the session on its pod (any other
        leaves it parked there); abort if the pod does not answer within `CLOSE_TIMEOUT_S`."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._conn.state is State.OPEN:
            self._conn.send_close(code)
            self._flush()
        asyncio.get_running_loop().call_later(CLOSE_TIMEOUT_S, transport.abort)

    def abort(self, ending: Ending = Ending.LOST) -> None:
        """Drop the transport now; `ending` says why (the gateway's verdict, e.g. `SILENT`)."""
        if self.ending is None:
            self.ending = ending
        if self._transport is not None:
            self._transport.abort()

    def _flush(self) -> None:
        transport = self._transport
        if transport is None:
            return
        for data in self._conn.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                transport.write_eof()
        if self._conn.close_expected() and not transport.is_closing():
            asyncio.get_running_loop().call_later(CLOSE_TIMEOUT_S, transport.abort)


async def connect(addr: str, headers: Mapping[str, str], timeout_s: float, tls: Tls | None = None) -> Upstream:
    """Dial `host:port` (over TLS with `tls`) and upgrade to the live path within `timeout_s`;
    raises OSError (ssl.SSLError included), TimeoutError or `UpstreamError`."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    loop = asyncio.get_running_loop()
    scheme = "ws" if tls is None else "wss"
    secure = {} if tls is None else {"ssl": tls.context, "server_hostname": tls.server_name or host}
    async with asyncio.timeout(timeout_s):
        transport, proto = await loop.create_connection(
            lambda: Upstream(f"{scheme}://{addr}{urls.LIVE_PATH}", headers), host, int(port), **secure)
        try:
            await proto.opened
        except BaseException:
            transport.abort()
            raise
    return proto
