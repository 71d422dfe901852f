"""A wedged gateway (issue 42): up, its sockets open, relaying nothing. The pod pings each socket a
gateway opened (`hop.PING_INTERVAL_S`) and parks the session whose gateway leaves a ping
unanswered for `hop.PING_TIMEOUT_S`, so the call outlives the wedge as it outlives a killed
gateway: its caller re-attaches through another gateway. The wedged gateway, once it runs again,
reads the pod's `hop.SILENT_CLOSE`, closes its caller with 1012 (the SDK's cue to reconnect) and
keeps the session's record: the call can re-attach through it later.

Real processes: Redis, a sim pod, two gateways; the wedge is SIGSTOP (SIGCONT ends it). About 8 s.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import orjson
import pytest
import websockets

from liveplex.gptlive.server import hop
from tests.support import clients, platform, pods

pytestmark = pytest.mark.timeout(120)

BOUND_S = hop.PING_INTERVAL_S + hop.PING_TIMEOUT_S
"""From the wedge to the park, at most (docs/continuity.md "Re-attach")."""


def test_a_wedged_gateways_call_is_parked_and_reattached_through_another(redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--usage-period-ms", "500")) as running, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL,
                                log=tmp_path / "gateway-b.log", command="gateway") as (second, _):
        platform.eventually(lambda: platform.get_json(second.admin_root + "/live/stats")["pods"] == 1,  # type: ignore[index]
                            "the second gateway to see the pod")
        try:
            asyncio.run(_call(running, second))
        finally:
            running.gateway_process.send_signal(signal.SIGCONT)  # never leave a stopped child behind


def _parked(running: platform.Platform) -> int:
    pod = running.pods[0][0]
    return platform.get_json(pod.admin_root + "/live/stats")["parked"]  # type: ignore[index,return-value]


async def _call(running: platform.Platform, second: pods.Running) -> None:
    ws, started = await clients.started(running.gateway.ws_url)
    session = started["session"]["id"]
    before, _ = await clients.events_while_speaking(ws, 1.0)
    wedged = time.monotonic()
    running.gateway_process.send_signal(signal.SIGSTOP)  # up, its sockets open, relaying nothing
    await asyncio.to_thread(platform.eventually, lambda: _parked(running) == 1, "the pod to park the call", 10)
    assert time.monotonic() - wedged < BOUND_S + 1.0  # the bound, and a poll's and a loaded box's slack
    pod_stats = platform.get_json(running.pods[0][0].admin_root + "/live/stats")
    assert pod_stats["dropped_connections"].get("ping_timeout", 0) == 0  # type: ignore[index,union-attr]  # parked, not dropped

    url = f"{second.ws_url}?session_id={session}&last_event_id={before[-1]['event_id']}"
    again = await websockets.connect(url, max_queue=None)
    after, deltas = await clients.events_while_speaking(again, 1.0)
    assert deltas > 5 and not any(e["type"] in ("session.started", "error") for e in after)

    running.gateway_process.send_signal(signal.SIGCONT)  # the wedge ends: the old caller is told to reconnect
    told = []
    with pytest.raises(websockets.ConnectionClosed):
        async with asyncio.timeout(10):
            while True:
                told.append(await ws.recv())
    assert ws.close_code == 1012
    assert not any('"session.closed"' in t or '"type":"error"' in t for t in told if isinstance(t, str))

    _, deltas = await clients.events_while_speaking(again, 0.5)
    assert deltas > 2  # the call goes on through the second gateway, untouched by the first's return
    # the first kept the session's record: the call re-attaches through it (taking over the second's socket)
    back = await websockets.connect(f"{running.gateway.ws_url}?session_id={session}", max_queue=None)
    later, deltas = await clients.events_while_speaking(back, 1.0)
    assert deltas > 5 and not any(e["type"] in ("session.started", "error") for e in later)
    with pytest.raises(websockets.ConnectionClosed):
        async with asyncio.timeout(5):
            while True:
                await again.recv()
    assert again.close_code == hop.TAKEN_OVER_CLOSE
    usage = [e["usage"]["seconds"] for e in before + after + later if e["type"] == "session.usage.updated"]
    assert usage == sorted(usage) and usage[-1] > usage[0]
    await back.send(orjson.dumps({"type": "session.close"}).decode())
    closed, _ = await clients.until(back, "session.closed")
    assert closed["session"]["id"] == session and closed["reason"] == "close_requested"
    await back.close()
