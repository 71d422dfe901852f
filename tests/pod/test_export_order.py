"""An export waits for the frames the gateway sent before it asked (`?after=N`, hop.EXPORT_PATH):
frames still on their way when the request lands are in the blob, never read after the session
left. Frames the gateway goes on sending while the export runs are in the blob up to the count the
pod answers (`hop.READ_HEADER`), and no further: the rest are the next pod's. Two real sim pods
over loopback."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time

import httpx
import orjson
import pytest
import websockets

from liveplex.gptlive.server import hop
from liveplex.live.drive import Pending
from liveplex.sim_pod.engine import SimEngine
from tests.pod.test_handover import AUTH, FLAGS, FRAMES, SENT, _audio, _open
from tests.support import pods


async def test_an_export_asked_with_frames_in_flight_carries_every_one_of_them() -> None:
    async with pods.in_process(*FLAGS) as a, pods.in_process(*FLAGS) as b, httpx.AsyncClient(headers=AUTH) as http:
        ws = await _open(a.ws_url, "sess_order")
        # the request overtakes the frames (another connection): the start and every frame are the
        # socket's first 1 + FRAMES messages, and the pod waits for them before it exports
        asked = asyncio.create_task(http.post(f"{a.root}/live/handover/sess_order",
                                              params={hop.EXPORT_AFTER: 1 + FRAMES}, timeout=10))
        await asyncio.sleep(0.2)
        for pcm in SENT:
            await ws.send(orjson.dumps({"type": "session.input_audio.append",
                                        "audio": base64.b64encode(pcm).decode()}).decode())
        exported = await asked
        assert exported.status_code == 200, exported.text
        played_a, code = await _audio(ws, None)
        assert code == hop.HANDED_OVER_CLOSE
        held = await http.post(f"{b.root}/live/handover", content=exported.content, timeout=10)
        ws_b = await _open(b.ws_url, "sess_order", **{hop.IMPORT_HEADER: held.json()["import_id"]})
        played_b, _ = await _audio(ws_b, FRAMES + 6)  # the rest of the echo, then silence
        await ws_b.close()
    played = played_a + played_b
    frames = [played[i:i + 3840] for i in range(0, len(played), 3840)]
    first = frames.index(SENT[0])
    assert frames[first:first + FRAMES] == SENT


def _append(pcm: bytes) -> str:
    return orjson.dumps({"type": "session.input_audio.append", "audio": base64.b64encode(pcm).decode()}).decode()


async def test_frames_sent_while_an_export_runs_are_in_the_blob_up_to_the_count_it_read_and_no_further(
        monkeypatch: pytest.MonkeyPatch) -> None:
    export = SimEngine.export

    def slow_export(engine: SimEngine, session_id: int, park: bool = False) -> bytes | Pending | None:
        data = export(engine, session_id, park)
        if data is not Pending.NEXT_TICK:  # asked after its own group's turn: that turn took long
            time.sleep(0.15)  # the tick the export waits for takes this long (a GPU tick is up to 35 ms)
        return data

    monkeypatch.setattr(SimEngine, "export", slow_export)
    async with pods.in_process(*FLAGS) as a, pods.in_process(*FLAGS) as b, httpx.AsyncClient(headers=AUTH) as http:
        ws = await _open(a.ws_url, "sess_flow")
        reader = asyncio.create_task(_audio(ws, None))
        asked: asyncio.Task[httpx.Response] | None = None
        sent = 0
        with contextlib.suppress(websockets.ConnectionClosed):
            while sent < FRAMES and not reader.done():  # the gateway's side: it forwards until the socket closes
                if sent == 3:
                    asked = asyncio.create_task(http.post(f"{a.root}/live/handover/sess_flow",
                                                          params={hop.EXPORT_AFTER: 1 + sent}, timeout=10))
                await ws.send(_append(SENT[sent]))
                sent += 1
                await asyncio.sleep(0.01)
        assert asked is not None
        exported = await asked
        assert exported.status_code == 200, exported.text
        read = int(exported.headers[hop.READ_HEADER])
        assert 4 <= read <= 1 + sent  # the start and the first 3 at least, then those it took before letting go
        played_a, code = await reader
        assert code == hop.HANDED_OVER_CLOSE
        held = await http.post(f"{b.root}/live/handover", content=exported.content, timeout=10)
        ws_b = await _open(b.ws_url, "sess_flow", **{hop.IMPORT_HEADER: held.json()["import_id"]})
        for pcm in SENT[read - 1:]:  # what the blob does not hold, in order
            await ws_b.send(_append(pcm))
        played_b, _ = await _audio(ws_b, FRAMES + 6)
        await ws_b.close()
    played = played_a + played_b
    heard = [f for i in range(0, len(played), 3840) if (f := played[i:i + 3840]) != bytes(3840)]
    assert heard == SENT  # none lost, none twice, in order (silence where B waited for them)


async def test_an_after_that_is_not_a_count_is_refused_by_name() -> None:
    async with pods.in_process(*FLAGS) as a, httpx.AsyncClient(headers=AUTH) as http:
        await _open(a.ws_url, "sess_bad")
        refused = await http.post(f"{a.root}/live/handover/sess_bad", params={hop.EXPORT_AFTER: "-1"})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == hop.EXPORT_AFTER


async def test_the_wait_for_frames_in_flight_is_woken_by_the_frame_it_waits_for() -> None:
    """`LiveSocket.reached`, what an export's catch-up awaits: resolved by the dispatch of the
    message it names (at once if already read), not found by polling the count."""
    async with pods.in_process(*FLAGS) as a:
        ws = await _open(a.ws_url, "sess_reach")  # the start is the socket's first message
        (socket,) = a.built.pod.front.sockets
        assert socket.reached(1).done()
        third = socket.reached(3)
        await ws.send(_append(SENT[0]))
        await asyncio.wait_for(socket.reached(2), 5)
        assert not third.done() and socket.dispatched == 2
        await ws.send(_append(SENT[1]))
        await asyncio.wait_for(third, 5)
        assert socket.dispatched == 3
        await ws.close()
