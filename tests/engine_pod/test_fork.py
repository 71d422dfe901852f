"""A fork of a stored PersonaPlex call starts exactly as a session resumed from the same record
(issue 45: "On the tiny PersonaPlex, a fork's first frames are exact against a session resumed from
the same record").

Real parts: Redis, one `serve --engine personaplex` pod on the tiny checkpoint (CPU, `--greedy`), a
gateway with a directory store (`--store-dir`). A stored call (`store: true`) runs on the pod and
ends; its resume record is then in the store (`sessions/<id>/record/*.bin`, concatenated in key
order: docs/storage.md). The fork socket (`/v1/live/sessions/{id}/fork`) forks it: the gateway reads
that record and the pod resumes it as a new session. The twin takes the same record straight from
the store directory and resumes it on the same pod through the resume route (`hop.RESUME_PATH`,
then a socket with `hop.IMPORT_HEADER` and the start the fork runs: the stored settings,
`gptlive.fork.merged`).

As in tests/engine_pod/test_reattach.py: with greedy draws and callers that send no audio (the
model hears silence), a session's audio is a function of its model state alone, frame by frame, so
the fork's first frames must equal the twin's delta for delta (base64, as sent). Each runs alone on
the pod (a batch of one, as the stored call did). A fork that started the conversation over would
match the stored call's own first frames instead.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest
import websockets

from liveplex.continuity import record
from liveplex.gateway import forking
from liveplex.gptlive import fork
from liveplex.gptlive.server import hop
from liveplex.storage import layout
from tests.engine_pod import tiny_pod
from tests.support import clients, platform

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # ~15 s: a PersonaPlex pod starts, three calls run

STORED, FIRST = 12, 10
"""Audio frames of the stored call before it ends; the fork's and the twin's first frames compared."""
STORED_START = {"type": "session.start", "session": {"model": "gpt-live-1", "instructions": "Be brief.",
                                                     "store": True}}




def _stored(store: Path, session_id: str) -> tuple[layout.Meta, bytes]:
    """The stored call's meta, once it says the call ended, and its record (what a fork reads)."""
    meta_path = store / layout.meta_key(session_id)

    def ended() -> bool:
        meta = layout.Meta.load(meta_path.read_bytes()) if meta_path.exists() else None
        return meta is not None and meta.status == "ended"

    platform.eventually(ended, "the stored call's meta to say it ended")
    meta = layout.Meta.load(meta_path.read_bytes())
    assert meta is not None
    chunks = sorted((store / layout.record_prefix(session_id)).glob("*.bin"))
    return meta, b"".join(chunk.read_bytes() for chunk in chunks)


def test_a_forks_first_frames_are_a_resumed_twins(tiny_dir: Path, redis_url: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    flags = ("--store-dir", str(store), "--store-flush-s", "0.3")
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=tiny_pod.flags(tiny_dir),
                           gateway_flags=flags) as running:
        original, forked, twin, rec = asyncio.run(_calls(running, store))
    got = record.decode(rec)
    assert isinstance(got, record.Record) and got.frames >= STORED  # the whole stored call
    assert len(set(twin)) == FIRST  # every frame tells where in the session it is
    assert forked == twin  # exact: the same model state, the same first frames
    assert forked != original[:FIRST]  # not started over: the stored conversation goes on


async def _calls(running: platform.Platform, store: Path) -> tuple[list[str], list[str], list[str], bytes]:
    gateway = running.gateway
    ws, started = await clients.started(gateway.ws_url, start=STORED_START)
    session_id = started["session"]["id"]
    original = await tiny_pod.audio(ws, STORED)
    await ws.send(orjson.dumps({"type": "session.close"}).decode())
    await clients.until(ws, "session.closed")
    await ws.close()
    meta, rec = await asyncio.to_thread(_stored, store, session_id)
    await asyncio.to_thread(platform.eventually, lambda: running.pod_sessions() == [0], "the stored call to end")

    ws = await websockets.connect(f"{gateway.ws_url}/{session_id}/fork", max_queue=None)
    await ws.send(orjson.dumps({"type": "session.start", "session": {}}).decode())
    begun, _ = await clients.until(ws, "session.started", timeout=30)
    assert begun["session"]["id"] != session_id
    forked = await tiny_pod.audio(ws, FIRST)
    await ws.close()
    await asyncio.to_thread(platform.eventually, lambda: running.pod_sessions() == [0], "the fork to end")

    pod = running.pods[0][0]
    async with httpx.AsyncClient() as http:
        held = await http.post(f"{pod.root}{hop.RESUME_PATH}", content=rec, timeout=10)
    assert held.status_code == 201, held.text
    settings = fork.merged(fork.Source(session_id, forking.settings_of(meta.session), webrtc=False), {})
    ws = await websockets.connect(pod.ws_url, max_queue=None, additional_headers={
        hop.SESSION_ID_HEADER: "sess_twin1", hop.IMPORT_HEADER: held.json()["import_id"]})
    await ws.send(orjson.dumps({"type": "session.start", "session": settings}).decode())
    await clients.until(ws, "session.started", timeout=30)
    twin = await tiny_pod.audio(ws, FIRST)
    await ws.close()
    return original, forked, twin, rec
