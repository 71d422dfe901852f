"""A call survives its own gateway (issue 42): a gateway killed under a call leaves the session
parked on its pod, and the caller re-attaches through another gateway with `?session_id=` (and the
last event it saw): the same session, none of its events lost or twice, its usage going on. Another
API key, an unknown id, an ended session: `session_not_found`, and the socket closes 1008. A
gateway stopping (SIGTERM: a rollout) hands its calls back: 1012 and no word, and it is gone in
moments; its callers continue through another.

Real processes: Redis, a sim pod, two gateways with keys; raw sockets as the caller (the SDK's
`on_reconnecting` does the same with `extra_query`, docs/continuity.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path

import orjson
import pytest
import websockets

from tests.support import clients, platform, pods

pytestmark = pytest.mark.timeout(120)

KEY, OTHER = "key-one", "key-two"
USAGE_MS = "500"


def _ws(gateway: pods.Running, **query: str) -> str:
    tail = "&".join(f"{k}={v}" for k, v in query.items())
    return gateway.ws_url + (f"?{tail}" if tail else "")


async def _received(ws: websockets.ClientConnection, seconds: float) -> list[dict]:
    """What `ws` is sent for `seconds`, or until it closes."""
    got = []
    with contextlib.suppress(TimeoutError, websockets.ConnectionClosed):
        async with asyncio.timeout(seconds):
            while True:
                got.append(orjson.loads(await ws.recv()))
    return got


def test_a_caller_continues_through_another_gateway_after_its_gateway_is_killed(
        redis_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n{OTHER}\n")
    auth = ("--api-key-file", str(keys))
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--usage-period-ms", USAGE_MS),
                           gateway_flags=auth) as running, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *auth, "--max-sessions-per-key", "1",
                                log=tmp_path / "gateway-b.log", command="gateway") as (second, _):
        asyncio.run(_call(running, second))


async def _call(running: platform.Platform, second: pods.Running) -> None:
    bearer = {"Authorization": f"Bearer {KEY}"}
    ws, started = await clients.started(running.gateway.ws_url, bearer)
    session_id = started["session"]["id"]
    before, _ = await clients.events_while_speaking(ws, 2.0)
    assert any(e["type"] == "session.usage.updated" for e in before)
    seen = before[-2]  # the caller missed what came after this
    running.gateway_process.send_signal(signal.SIGKILL)  # its gateway dies under the call
    await asyncio.sleep(0.5)

    assert (await clients.refused(_ws(second, session_id=session_id), OTHER))["code"] == "session_not_found"
    assert (await clients.refused(_ws(second, session_id="sess_unknown"), KEY))["code"] == "session_not_found"

    url = _ws(second, session_id=session_id, last_event_id=seen["event_id"])
    again = await websockets.connect(url, additional_headers=bearer, max_queue=None)
    after, deltas = await clients.events_while_speaking(again, 2.0)
    assert deltas > 10  # the session's audio, through the other gateway
    assert not any(e["type"] == "session.started" for e in after)  # no new session: the same one
    assert after[0] == before[-1]  # what it missed first, once
    ids = [e["event_id"] for e in before + after]
    assert len(ids) == len(set(ids)) + 1  # only the one it missed is seen twice: nothing else
    usage = [e["usage"]["seconds"] for e in before + after if e["type"] == "session.usage.updated"]
    assert usage == sorted(usage) and usage[-1] >= 4.0  # its time went on through the gap
    async with websockets.connect(second.ws_url, additional_headers=bearer) as third:  # B counts it for KEY
        await third.send(orjson.dumps(clients.START).decode())
        refused, _ = await clients.until(third, "error")
    assert refused["error"]["code"] == "server_busy" and "1 live sessions" in refused["error"]["message"]

    await again.send(orjson.dumps({"type": "session.close", "event_id": "bye"}).decode())
    closed, _ = await clients.until(again, "session.closed")
    assert closed["session"]["id"] == session_id and closed["reason"] == "close_requested"
    assert closed["usage"]["seconds"] >= usage[-1]
    await again.close()
    await asyncio.sleep(0.3)
    assert (await clients.refused(url, KEY))["code"] == "session_not_found"  # ended: nothing to continue



def test_a_stopping_gateway_hands_its_calls_back_and_exits_at_once(redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--usage-period-ms", USAGE_MS)) as running, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL,
                                log=tmp_path / "gateway-b.log", command="gateway") as (second, _):
        asyncio.run(_rollout(running, second))


async def _rollout(running: platform.Platform, second: pods.Running) -> None:
    ws, started = await clients.started(running.gateway.ws_url)
    before, _ = await clients.events_while_speaking(ws, 1.2)
    pod = running.pods[0][1]
    pod.send_signal(signal.SIGSTOP)  # it cannot answer the gateway's close for now
    stopping = time.monotonic()
    running.gateway_process.send_signal(signal.SIGTERM)  # the default --drain-deadline-s is 600 s
    told = await _received(ws, 0.4)
    assert ws.close_code is None  # the caller goes once its pod's socket is closed, not before
    pod.send_signal(signal.SIGCONT)
    told += await _received(ws, 5)
    assert ws.close_code == 1012  # reconnect: the SDK's `on_reconnecting` is called
    assert not any(e["type"] in ("session.closed", "error") for e in told)
    await asyncio.to_thread(running.gateway_process.wait, 10)
    assert time.monotonic() - stopping < 5  # not the longest call: nothing was left to wait for

    # No `last_event_id`: what the pod sent before it read the close came through the old gateway,
    # and what it made after is replayed: each usage event once, none missing.
    again = await websockets.connect(_ws(second, session_id=started["session"]["id"]), max_queue=None)
    after, deltas = await clients.events_while_speaking(again, 1.5)
    assert deltas > 5 and not any(e["type"] in ("session.started", "error") for e in after)
    usage = [e["usage"]["seconds"] for e in before + told + after if e["type"] == "session.usage.updated"]
    steps = [b - a for a, b in zip(usage, usage[1:], strict=False)]  # in 80 ms frames
    assert all(abs(step - int(USAGE_MS) / 1000) < 0.09 for step in steps) and usage[-1] >= 2.0, usage
    await again.close()
