"""A session moves between two real sim pods over loopback (issue 24, docs/continuity.md): exported
from A by the handover route, imported into B, it echoes on with no frame lost or repeated."""

from __future__ import annotations

import asyncio
import base64

import httpx
import numpy as np
import orjson
import websockets

from liveplex.gptlive.server import hop
from liveplex.pod import handover
from tests.support import pods

KEY = "pod-t0ken"
AUTH = {"authorization": f"Bearer {KEY}"}
FLAGS = ("--api-key", KEY, "--echo-frames", "3", "--jitter-frames", "60", "--prebuffer-frames", "1")
START = orjson.dumps({"type": "session.start", "session": {"model": "liveplex-sim"}}).decode()
FRAMES = 20
SENT = [np.full(1920, 1000 + 50 * i, "<i2").tobytes() for i in range(FRAMES)]  # loud, each its own


async def _open(url: str, session_id: str, **headers: str) -> websockets.ClientConnection:
    ws = await websockets.connect(url, additional_headers={**AUTH, hop.SESSION_ID_HEADER: session_id, **headers})
    await ws.send(START)
    async with asyncio.timeout(10):
        while (event := orjson.loads(await ws.recv()))["type"] != "session.started":
            assert event["type"] != "error", event
    return ws


async def _audio(ws: websockets.ClientConnection, frames: int | None) -> tuple[bytes, int | None]:
    """Audio until `frames` frames came (None: until the socket closes); and the close code."""
    pcm = b""
    async with asyncio.timeout(15):
        try:
            while frames is None or len(pcm) < frames * 3840:
                event = orjson.loads(await ws.recv())
                if event["type"] == "session.output_audio.delta":
                    pcm += base64.b64decode(event["delta"])
                assert event["type"] != "session.closed", event
        except websockets.ConnectionClosed as closed:
            return pcm, closed.rcvd.code if closed.rcvd else None
    return pcm, None


async def test_a_session_moves_from_one_sim_pod_to_another_with_no_frame_lost_or_repeated() -> None:
    async with pods.in_process(*FLAGS) as a, pods.in_process(*FLAGS) as b, httpx.AsyncClient(headers=AUTH) as http:
        ws = await _open(a.ws_url, "sess_move1")
        for pcm in SENT:  # all of it now: what A has not played yet travels in the blob
            await ws.send(orjson.dumps({"type": "session.input_audio.append",
                                        "audio": base64.b64encode(pcm).decode()}).decode())
        before, _ = await _audio(ws, 6)
        exported = await http.post(f"{a.root}/live/handover/sess_move1", timeout=10)
        assert exported.status_code == 200, exported.text
        rest_a, code = await _audio(ws, None)
        assert code == hop.HANDED_OVER_CLOSE
        played_a = before + rest_a
        assert int(exported.headers[hop.FRAMES_HEADER]) * 3840 == len(played_a)

        held = await http.post(f"{b.root}/live/handover", content=exported.content, timeout=10)
        assert held.status_code == 201, held.text
        assert held.json()["voice"] == "NATF2" and held.json()["frames"] * 3840 == len(played_a)
        ws_b = await _open(b.ws_url, "sess_move1", **{hop.IMPORT_HEADER: held.json()["import_id"]})
        played_b, _ = await _audio(ws_b, FRAMES)
        await ws_b.close()

    played = played_a + played_b
    frames = [played[i:i + 3840] for i in range(0, len(played), 3840)]
    first = frames.index(SENT[0])
    assert all(f == bytes(3840) for f in frames[:first])
    assert frames[first:first + FRAMES] == SENT  # every frame once, in order, across the move
    assert len(played_a) < (first + FRAMES) * 3840  # and the move came mid-echo


async def test_the_routes_refuse_without_the_pod_token_an_unknown_session_and_a_foreign_blob() -> None:
    async with pods.in_process(*FLAGS) as a, httpx.AsyncClient() as http:
        assert (await http.post(f"{a.root}/live/handover/sess_x")).status_code == 401
        missing = await http.post(f"{a.root}/live/handover/sess_x", headers=AUTH)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "session_not_found"
        bad = await http.post(f"{a.root}/live/handover", headers=AUTH, content=b"LPHO\x01\x00junk")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "handover_malformed"
        async with websockets.connect(a.ws_url, additional_headers={
                **AUTH, hop.SESSION_ID_HEADER: "sess_y", hop.IMPORT_HEADER: "imp_nothing"}) as ws:
            await ws.send(START)
            event = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert event["type"] == "error" and "imp_nothing" in event["error"]["message"]


def test_held_imports_expire_and_are_bounded_and_taken_once() -> None:
    from liveplex.continuity import blob

    header = blob.Header("sim", "liveplex-sim", 0, "NATF2", 3)
    imports = handover.Imports(2)
    a = imports.put(b"a", header, 0.0)
    b = imports.put(b"b", header, 1.0)
    assert a and b and imports.put(b"c", header, 2.0) is None  # full
    held = imports.take(a, 2.0)
    assert held is not None and held.data == b"a" and imports.take(a, 2.0) is None
    assert imports.take(b, 1.0 + handover.IMPORT_TTL_S) is None and len(imports) == 0  # expired
