"""A client's close frame on a session the pod writes checkpoints on is answered at once, and the
session's engine slot is freed within a tick or two.

The client reads its socket whatever it leaves unread (`max_queue=None`): with websockets' default
(16) a client that leaves more than 16 events unread, as a test that only waits on the pod's
gauges does (two events a tick here), stops reading its own socket, so the pod's close reply sits
in its receive buffer and `close()` gives up after `close_timeout` (10 s, code 1006): an
"unanswered" close that is the client's (python-websockets/websockets#1555, by design).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import websockets

from liveplex.gptlive.server import hop
from tests.support import pods

START = orjson.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}).decode()


async def _sessions(http: httpx.AsyncClient, pod: pods.Running) -> int:
    return (await http.get(pod.admin_root + "/live/stats")).json()["sessions"]


async def test_a_close_frame_after_checkpoints_is_answered_at_once_and_frees_the_slot() -> None:
    async with pods.in_process() as pod, httpx.AsyncClient() as http:
        async with websockets.connect(pod.ws_url, additional_headers={hop.SESSION_ID_HEADER: "sess_1"},
                                      max_queue=None) as ws:
            await ws.send(START)
            async with asyncio.timeout(10):
                while orjson.loads(await ws.recv())["type"] != "session.started":
                    pass
                checkpoints = 0
                while checkpoints < 3:  # one a tick: the close lands among them
                    checkpoints += (await ws.recv()).startswith(hop.CHECKPOINT_PREFIX)
            assert await _sessions(http, pod) == 1
            began = time.monotonic()
            await ws.close()
            answered_s = time.monotonic() - began
        assert ws.protocol.close_rcvd is not None and ws.close_code == 1000, "the close was not answered"
        assert answered_s < 0.5
        assert (await http.get(pod.admin_root + "/live/stats")).json()["sockets"] == 0
        async with asyncio.timeout(1):  # the engine counts its sessions once a tick
            while await _sessions(http, pod):
                await asyncio.sleep(0.02)
