"""A TCP relay on loopback that hands the server each segment the client wrote a gap after the one
before, so two writes the client made apart reach the server apart, and writes that left in one
segment (corked) reach it together: what a busy network path does to a checker preempted between
its writes, made to happen every time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

_READ = 1 << 16


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gap_s: float) -> None:
    """Copy `reader` to `writer`, each read (what had arrived together) written at least `gap_s`
    after the previous one. Reading goes on meanwhile, so the reads split where the peer's writes
    did, not where this relay's delays would."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    async def read() -> None:
        try:
            while data := await reader.read(_READ):
                chunks.put_nowait(data)
        except OSError:
            pass
        finally:
            chunks.put_nowait(b"")

    reading = asyncio.create_task(read())
    free_at = loop.time()
    try:
        while chunk := await chunks.get():
            await asyncio.sleep(max(0.0, free_at - loop.time()))
            writer.write(chunk)
            await writer.drain()
            free_at = loop.time() + gap_s
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:  # the other end is gone: so is this direction
        pass
    finally:
        reading.cancel()


@contextlib.asynccontextmanager
async def spaced(upstream: str, gap_s: float) -> AsyncIterator[str]:
    """A relay to `upstream` (`host:port`) that spaces what the client sends `gap_s` apart (the
    server's replies pass straight through); yields its own `host:port`."""
    host, port = upstream.rsplit(":", 1)
    handlers: set[asyncio.Task[None]] = set()

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
            try:
                await asyncio.gather(_pipe(client_reader, server_writer, gap_s),
                                     _pipe(server_reader, client_writer, 0.0))
            finally:
                server_writer.close()
        finally:
            client_writer.close()
            handlers.discard(task)

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()
