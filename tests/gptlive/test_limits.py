"""What no client can do to a pod (issue 11): every buffer bounded, every idle connection reaped,
every error answered at a bounded rate."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import httpx
import orjson
import pytest
import websockets

from liveplex.gptlive import events
from liveplex.gptlive.server import native
from tests.support import hostile, pods

pytestmark = pytest.mark.timeout(60)


async def until(condition, timeout_s: float, what: str) -> None:
    """Poll `condition()` (the server's own counters) until it holds, failing after `timeout_s`."""
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)
    assert condition(), what


async def flood(mute: hostile.Mute, event: dict[str, object]) -> None:
    """Send `event` until the server cuts the connection."""
    with contextlib.suppress(OSError):
        while True:
            await mute.send(event)


async def test_a_client_that_never_reads_is_dropped_once_what_it_is_owed_passes_the_byte_limit(caplog) -> None:
    """Errors echo the event id twice (a 64 KB one, before ids were capped): without a byte limit
    the held queue grew without bound (67 MB to 933 MB in 4 s). Now the client is dropped with
    close 1011 once more than `--outbound-max-bytes` is held, and its descriptor is gone a grace
    period later."""
    limit = 256 * 1024
    async with pods.in_process("--outbound-max-bytes", str(limit), "--errors-per-s", "100000") as running:
        front = running.built.pod.front
        mute = await hostile.Mute.open(running.address)
        sending = asyncio.create_task(flood(mute, {"type": 5, "event_id": "x" * events.MAX_EVENT_ID_CHARS}))
        try:
            await until(lambda: front.stats.dropped, 20, "the client was never dropped")
            assert dict(front.stats.dropped) == {"slow_bytes": 1}
            assert front.stats.sockets_open == 0
            assert await hostile.ended(mute.sock, native.DROP_GRACE_S + 5)
        finally:
            sending.cancel()
            mute.close()
    (drop,) = [r for r in caplog.records if r.getMessage() == "client too slow; dropping it"]
    one_error = 2 * events.MAX_EVENT_ID_CHARS + 1024  # the id is echoed twice
    assert limit < drop.held_bytes <= limit + one_error
    assert drop.reason == f"more than {limit} bytes queued"


async def test_a_client_answering_every_error_with_a_bad_event_gets_every_answer_within_the_error_budget() -> None:
    """The loop `liveplex check` fell into (4,000 errors a second for 15 minutes): the socket is
    not read once the second's budget is spent, so the loop runs at the budget, and nothing goes
    unanswered."""
    budget = 20
    async with pods.in_process("--errors-per-s", str(budget)) as running:
        async with websockets.connect(running.ws_url) as ws:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            answered = 0
            while loop.time() - t0 < 1.5:
                await ws.send(orjson.dumps({"type": "session.close", "event_id": f"e{answered}"}).decode())
                reply = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
                assert (reply["error"]["code"], reply["client_event_id"]) == ("session_not_started", f"e{answered}")
                answered += 1
            elapsed = loop.time() - t0
    windows = int(elapsed) + 1
    assert budget < answered <= budget * windows, (answered, elapsed)


async def test_connections_that_never_complete_a_request_are_reaped() -> None:
    """10 of 10 such connections were still open after 244 s; a slowloris that keeps sending one
    byte at a time is reaped too, and a well-behaved keep-alive client is not."""
    async with pods.in_process("--header-timeout-s", "0.5") as running:
        front = running.built.pod.front
        loop = asyncio.get_running_loop()
        silent = [await hostile.tcp(running.address) for _ in range(5)]
        partial = [await hostile.tcp(running.address) for _ in range(5)]
        for sock in partial:
            await loop.sock_sendall(sock, b"GET /hea")
        slow = await hostile.tcp(running.address)

        async def drip() -> None:
            with contextlib.suppress(OSError):
                for byte in b"GET /health HTTP/1.1\r\nHost: pod\r\nX-Pad: " + b"a" * 1000:
                    await loop.sock_sendall(slow, bytes([byte]))
                    await asyncio.sleep(0.05)

        dripping = asyncio.create_task(drip())
        async with httpx.AsyncClient(base_url=running.root) as http:
            for _ in range(3):  # one kept-alive connection, paced past the header timeout
                assert (await http.get("/health")).text == "ok"
                await asyncio.sleep(0.3)
        cut = await asyncio.gather(*(hostile.ended(s, 5) for s in [*silent, *partial, slow]))
        dripping.cancel()
        assert all(cut)
        assert front.stats.dropped["header_timeout"] == 11
        for sock in [*silent, *partial, slow]:
            sock.close()


async def test_at_the_cap_a_newcomer_evicts_the_oldest_unfinished_request_else_is_cut() -> None:
    """Three connections that never send a request fill `--max-connections 3`: a fourth takes the
    place of the oldest. Once all three are live sessions (past their request), a fourth is cut at
    once, and capacity comes back when they go."""
    async with pods.in_process("--max-connections", "3", "--max-pending-connections", "3") as running:
        front = running.built.pod.front
        held = [await hostile.tcp(running.address) for _ in range(3)]
        extra = await hostile.tcp(running.address)
        assert await hostile.ended(held[0], 2)
        assert not await hostile.ended(extra, 0.3)
        assert front.stats.dropped["pending_evicted"] == 1
        for sock in [*held, extra]:
            sock.close()
        live = []
        async with asyncio.timeout(5):
            while len(live) < 3:  # the server sees the closed ones go within a loop turn or two
                with contextlib.suppress(OSError, websockets.InvalidHandshake):
                    live.append(await websockets.connect(running.ws_url))
                await asyncio.sleep(0.02)
        cut = await hostile.tcp(running.address)
        assert await hostile.ended(cut, 2)
        assert front.stats.dropped["over_capacity"] == 1
        for ws in live:
            await ws.close()
        async with asyncio.timeout(5):
            while True:
                with contextlib.suppress(httpx.TransportError):
                    async with httpx.AsyncClient(base_url=running.root) as http:
                        if (await http.get("/health")).text == "ok":
                            stats = (await http.get("/live/stats")).json()
                            metrics = (await http.get(running.admin_root + "/metrics")).text
                            break
                await asyncio.sleep(0.02)
    assert stats["dropped_connections"] == {"over_capacity": 1, "pending_evicted": 1}
    assert 'liveplex_engine_connections_dropped_total{reason="over_capacity"} 1.0' in metrics


async def stuffed(running: pods.Running) -> hostile.Mute:
    """A client that reads nothing, owed 16 MB of errors (far more than the kernel buffers hold),
    once the pod's send buffer is full (flags: an `--outbound-max-bytes` above that, and an
    `--errors-per-s` that does not pause reading for long)."""
    front = running.built.pod.front
    mute = await hostile.Mute.open(running.address)
    try:
        for _ in range(12_000):
            await mute.send({"type": 5, "event_id": "x" * events.MAX_EVENT_ID_CHARS})
        await until(lambda: any(not s.writable for s in front.sockets), 5, "the send buffer never filled")
    except BaseException:
        mute.close()
        raise
    return mute


async def test_an_unanswered_ping_aborts_a_socket_whose_send_buffer_is_full() -> None:
    """uvicorn's keepalive timeout closed the transport, which waits for the send buffer to drain:
    a client that reads nothing kept its descriptor (and the session's buffers) forever."""
    flags = ("--ws-ping-interval-s", "0.5", "--outbound-max-bytes", str(1 << 30), "--errors-per-s", "10000")
    async with pods.in_process(*flags) as running:
        front = running.built.pod.front
        mute = await stuffed(running)
        try:
            await until(lambda: front.stats.sockets_open == 0, 10, "the socket is still open")
            assert dict(front.stats.dropped) == {"ping_timeout": 1}
        finally:
            mute.close()


@pytest.mark.parametrize("last_words", [hostile.Mute.send_close, hostile.Mute.send_invalid_text])
async def test_a_close_answered_into_a_full_send_buffer_aborts_the_socket_after_the_close_timeout(
        last_words: Callable[[hostile.Mute], Awaitable[None]]) -> None:
    """uvicorn answers a client's close frame (or a frame it cannot read) by closing the transport,
    which waits for the send buffer to drain: a client that then reads nothing kept its descriptor,
    counted against `--max-connections`, forever (the session itself ends at once)."""
    flags = ("--outbound-max-bytes", str(1 << 30), "--errors-per-s", "100000")
    async with pods.in_process(*flags) as running:
        front = running.built.pod.front
        mute = await stuffed(running)
        try:
            (live,) = front.sockets
            proto = live._proto
            proto.close_timeout = 0.2  # uvicorn's 10 s, shortened for the test
            await last_words(mute)
            await until(lambda: front.stats.sockets_open == 0, 5, "the session did not end")
            await until(lambda: proto.disconnected, 5, "the socket is still open")
        finally:
            mute.close()
