"""A call through a real gateway moves off a draining sim pod with no frame lost or repeated: the
pod's handover routes (this branch) under the gateway's move (issue 24 Part 2), all real
subprocesses over a real redis-server."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest
import websockets

from tests.support import platform

pytestmark = pytest.mark.slow

FRAMES = 40
SENT = [np.full(1920, 1000 + 50 * i, "<i2").tobytes() for i in range(FRAMES)]  # loud, each its own
START = orjson.dumps({"type": "session.start", "session": {"model": "liveplex-sim"}}).decode()


async def test_a_call_moves_off_a_draining_pod_unnoticed(redis_url: str, tmp_path: Path) -> None:
    flags = ("--echo-frames", "3", "--jitter-frames", "60", "--prebuffer-frames", "1")
    with platform.platform(redis_url, tmp_path, 2, pod_flags=flags) as p:
        async with websockets.connect(p.gateway.ws_url) as ws, httpx.AsyncClient() as http:
            await ws.send(START)
            async with asyncio.timeout(10):
                while orjson.loads(await ws.recv())["type"] != "session.started":
                    pass
            for pcm in SENT:
                await ws.send(orjson.dumps({"type": "session.input_audio.append",
                                            "audio": base64.b64encode(pcm).decode()}).decode())
            played, kinds, drain = b"", set(), None
            async with asyncio.timeout(30):
                while SENT[-1] not in [played[i:i + 3840] for i in range(0, len(played), 3840)]:
                    event = orjson.loads(await ws.recv())
                    kinds.add(event["type"])
                    if event["type"] == "session.output_audio.delta":
                        played += base64.b64decode(event["delta"])
                    if drain is None and len(played) >= 8 * 3840:
                        (holder,) = [pod for (pod, _), n in zip(p.pods, p.pod_sessions()) if n == 1]
                        drain = asyncio.create_task(http.post(f"{holder.admin_root}/drain?deadline_s=20", timeout=30))
            assert drain is not None
            answer = (await drain).json()
            assert answer == {"drained": True, "ended_at_deadline": 0}
            assert p.pod_sessions().count(1) == 1  # the call runs on the other pod
    assert kinds <= {"session.output_audio.delta", "session.output_transcript.delta", "session.usage.updated"}
    frames = [played[i:i + 3840] for i in range(0, len(played), 3840)]
    first = frames.index(SENT[0])
    assert frames[first:first + FRAMES] == SENT  # every frame once, in order, across the move
