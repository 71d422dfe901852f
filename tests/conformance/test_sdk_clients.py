"""Check 40's SDK clients always end: a refused start, a silent server (issue 11, item 5)."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from websockets.asyncio.server import serve

from liveplex.conformance.checklist import Failed
from liveplex.conformance.checks import clients
from tests.gptlive.test_socket import START, send, until
from tests.support import pods

pytestmark = pytest.mark.timeout(60)


async def test_the_dispatch_client_stops_at_the_first_error_it_did_not_ask_for() -> None:
    """Its handler answered every error with `session.close`: on a full server the start's
    `server_busy`, then each close's `session_not_started`, for 15 minutes at 4,000 a second."""
    async with pods.in_process("--max-sessions", "1") as running:
        async with websockets.connect(running.ws_url) as holder:
            await send(holder, START)
            await until(holder, "session.started")
            async with asyncio.timeout(20):
                errors = await asyncio.to_thread(clients._sync_dispatch, running.base_url, "key", 15.0)
    assert errors == ["server_busy"]


async def test_a_sync_client_facing_a_silent_server_gives_up_at_its_deadline() -> None:
    """A thread cannot be cancelled: without a deadline of its own, `liveplex check` never exited."""
    async def silent(ws) -> None:
        await ws.wait_closed()

    async with serve(silent, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        with pytest.raises(Failed, match="no session.closed within 1.0 s"):
            async with asyncio.timeout(20):
                await asyncio.to_thread(clients._sync_smoke, f"http://127.0.0.1:{port}/v1", "key", 1.0)
