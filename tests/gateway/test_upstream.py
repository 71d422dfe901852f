"""`Upstream.ending` against real WebSocket servers that end in each way a pod can: only the pod's
own faults are `pods_fault`; a message over the limit is the client's doing."""

from __future__ import annotations

import asyncio

import pytest
import websockets

from liveplex.gateway import upstream
from liveplex.gptlive import events


async def _ending(handler) -> upstream.Upstream:
    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        up = await upstream.connect(f"127.0.0.1:{port}", {}, 5)
        up.on_message = lambda _: None
        up.send('{"type":"session.start"}')
        async with asyncio.timeout(10):
            await up.lost
        return up


async def test_a_close_handshake_is_closed_with_the_pods_code() -> None:
    async def handler(ws) -> None:
        await ws.recv()
        await ws.close(1001)
    up = await _ending(handler)
    assert (up.ending, up.close_code, up.ending.pods_fault) == (upstream.Ending.CLOSED, 1001, False)


async def test_a_message_over_the_servers_largest_is_too_large_and_not_the_pods_fault() -> None:
    async def handler(ws) -> None:
        await ws.recv()
        await ws.send("x" * (events.MAX_SERVER_MESSAGE_BYTES + 1))
        await ws.wait_closed()
    up = await _ending(handler)
    assert up.ending is upstream.Ending.TOO_LARGE and not up.ending.pods_fault


async def test_a_message_at_the_servers_largest_is_read() -> None:
    got: list[int] = []

    async def handler(ws) -> None:
        await ws.recv()
        await ws.send("x" * events.MAX_SERVER_MESSAGE_BYTES)
        await ws.close(1000)
    async with websockets.serve(handler, "127.0.0.1", 0, max_size=None) as server:
        up = await upstream.connect(f"127.0.0.1:{server.sockets[0].getsockname()[1]}", {}, 5)
        up.on_message = lambda m: got.append(len(m))
        up.send("{}")
        async with asyncio.timeout(10):
            await up.lost
    assert got == [events.MAX_SERVER_MESSAGE_BYTES] and up.received == 1


@pytest.mark.parametrize("abort", [True, False])
async def test_a_transport_gone_without_a_close_is_lost_and_the_pods_fault(abort: bool) -> None:
    async def handler(ws) -> None:
        await ws.recv()
        ws.transport.abort() if abort else ws.transport.close()
    up = await _ending(handler)
    assert up.ending is upstream.Ending.LOST and up.ending.pods_fault


async def test_broken_framing_is_a_violation() -> None:
    async def handler(ws) -> None:
        await ws.recv()
        ws.transport.write(b"\x8f\x00")  # a reserved opcode
        await asyncio.sleep(5)
    up = await _ending(handler)
    assert up.ending is upstream.Ending.VIOLATION and up.ending.pods_fault
