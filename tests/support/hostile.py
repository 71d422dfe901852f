"""Clients that misbehave on purpose: raw TCP that never finishes a request, and a WebSocket client
that writes and never reads (websockets' sans-I/O client over a plain socket with a tiny receive
buffer, so the server's send buffer fills fast)."""

from __future__ import annotations

import asyncio
import socket

import orjson
from websockets.client import ClientProtocol
from websockets.http11 import Response
from websockets.uri import parse_uri

TINY_RCVBUF = 4096


async def tcp(address: str, rcvbuf: int | None = None) -> socket.socket:
    """A connected non-blocking TCP socket to `host:port`."""
    host, port = address.rsplit(":", 1)
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    return sock


async def ended(sock: socket.socket, timeout_s: float) -> bool:
    """Read (and discard) until the server closed or reset the connection; False if it is still
    open after `timeout_s`."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout_s):
            while await loop.sock_recv(sock, 1 << 20):
                pass
    except TimeoutError:
        return False
    except OSError:  # reset: the server aborted
        pass
    return True


class Mute:
    """A WebSocket client that sends and never reads what the server sends."""

    def __init__(self, sock: socket.socket, proto: ClientProtocol) -> None:
        self.sock = sock
        self._proto = proto

    @classmethod
    async def open(cls, address: str, rcvbuf: int = TINY_RCVBUF) -> Mute:
        """Upgrade `/v1/live/sessions`; only the 101 response is read."""
        loop = asyncio.get_running_loop()
        sock = await tcp(address, rcvbuf)
        proto = ClientProtocol(parse_uri(f"ws://{address}/v1/live/sessions"))
        proto.send_request(proto.connect())
        await loop.sock_sendall(sock, b"".join(proto.data_to_send()))
        async with asyncio.timeout(10):
            while not any(isinstance(e, Response) for e in proto.events_received()):
                proto.receive_data(await loop.sock_recv(sock, 4096))
        return cls(sock, proto)

    async def send(self, event: dict[str, object] | str | bytes) -> None:
        """One frame: text, a dict as JSON text, or bytes as a binary frame; waits while the
        server does not read."""
        if isinstance(event, bytes):
            self._proto.send_binary(event)
        else:
            self._proto.send_text((event if isinstance(event, str) else orjson.dumps(event).decode()).encode())
        await self._write()

    async def send_close(self, code: int = 1000) -> None:
        """A close frame; the server's answer is not read either."""
        self._proto.send_close(code)
        await self._write()

    async def send_invalid_text(self) -> None:
        """A text frame that is not UTF-8 (the server closes with 1007)."""
        self._proto.send_text(b"\xff")
        await self._write()

    async def _write(self) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, b"".join(self._proto.data_to_send()))

    def close(self) -> None:
        self.sock.close()
