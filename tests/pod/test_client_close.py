"""A client's close frame on a session the pod writes checkpoints on is answered at once, and the
session's engine slot is freed within a tick or two.

The client reads its socket whatever it leaves unread (`clients.started`): with websockets'
default `max_queue` (16) a client that leaves more than 16 events unread, as a test that only
waits on the pod's gauges does (two events a tick here), stops reading its own socket, so the
pod's answer sits in its receive buffer and `close()` gives up after its `close_timeout` (10 s,
code 1006): an "unanswered" close that is the client's (python-websockets/websockets#1555, by
design; tests/pod/test_reserved.py met it).
"""

from __future__ import annotations

import asyncio
import time

import httpx

from liveplex.gptlive.server import hop
from tests.support import clients, pods


async def _sessions(http: httpx.AsyncClient, pod: pods.Running) -> int:
    return (await http.get(pod.admin_root + "/live/stats")).json()["sessions"]


async def test_a_close_frame_after_checkpoints_is_answered_at_once_and_frees_the_slot() -> None:
    async with pods.in_process() as pod, httpx.AsyncClient() as http:
        ws, _ = await clients.started(pod.ws_url, {hop.SESSION_ID_HEADER: "sess_1"})
        async with ws:
            async with asyncio.timeout(10):
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
