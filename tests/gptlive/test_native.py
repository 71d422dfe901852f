"""What only the native live socket does: the backlog while a start is pending, and the live
path refused when the app is served without it."""

from __future__ import annotations

import orjson
import pytest
import websockets

from tests.support import pods
from tests.support.clients import LOUD, START, until

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("appends", [1, 40])
async def test_frames_sent_behind_a_start_are_replayed_in_order(appends: int) -> None:
    """Start, appends and close in one burst: the appends parsed while the start is pending wait
    in the backlog, and the close after them ends the session normally (read while starting,
    `Connection` would fail the socket with 1011)."""
    burst = [START, *({"type": "session.input_audio.append", "event_id": f"a{i}", "audio": LOUD}
                      for i in range(appends)), {"type": "session.close", "event_id": "c"}]
    async with pods.in_process() as running:
        address = running.address
        ws = await websockets.connect(f"ws://{address}/v1/live/sessions")
        for event in burst:  # not waiting for session.started: the start is still pending
            await ws.send(orjson.dumps(event).decode())
        closed, seen = await until(ws, "session.closed")
        await ws.wait_closed()
    assert [e["type"] for e in seen if e["type"] == "error"] == []
    assert closed["reason"] == "close_requested"
    assert ws.close_code == 1000


async def test_the_live_path_needs_the_native_protocol() -> None:
    """Served through plain ASGI WebSockets, the live path says why it is refused."""
    async with pods.in_process(ws="websockets-sansio") as running:
        address = running.address
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(f"ws://{address}/v1/live/sessions")
    assert refused.value.response.status_code == 500
    assert b"LiveProtocol" in refused.value.response.body
