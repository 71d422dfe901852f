"""A draining pod's calls move to another pod through the gateway, and the caller notices nothing:
real sim pods and a gateway over real Redis, callers whose frames are stamped, so the sim's echo
shows every frame played back once, in order, across the move."""

from __future__ import annotations

import asyncio
import threading
import urllib.request

import orjson
import websockets

from liveplex.placement import PlacementClient
from tests.support import clients, platform
from tests.support.clients import START, StampedCall, until


def _metric(root: str, name: str) -> dict[str, float]:
    with urllib.request.urlopen(root + "/metrics", timeout=5) as response:
        text = response.read().decode()
    return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line.startswith(name)}


def test_a_draining_pods_calls_move_to_another_pod_without_a_word_to_the_callers(redis_url, tmp_path) -> None:
    # one move at a time: the second call waits its turn, relayed from its pod as ever
    with platform.platform(redis_url, tmp_path, gateway_flags=("--moves-at-once", "1")) as p:
        async def scenario() -> tuple[list[StampedCall], int, list[object]]:
            calls = [await StampedCall.start(p.gateway.ws_url) for _ in range(3)]
            platform.eventually(lambda: sorted(p.pod_sessions()) == [1, 2], "two calls on one pod")
            await asyncio.sleep(1.5)
            drained: list[object] = []
            source = p.pod_sessions().index(2)
            await asyncio.to_thread(lambda: drained.append(
                platform.get_json(p.pods[source][0].admin_root + "/drain?deadline_s=30")))
            await asyncio.sleep(1.5)
            for call in calls:
                await call.stop()
            return calls, source, drained

        calls, source, drained = asyncio.run(scenario())
        assert drained == [{"drained": True, "ended_at_deadline": 0}]  # emptied by the move, not the deadline
        assert all(call.unbroken() for call in calls), [(c.stamps, c.others[-3:]) for c in calls]
        moves = _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total")
        assert moves['liveplex_gateway_session_moves_total{result="moved"}'] == 2.0
        ended = _metric(p.pods[source][0].admin_root, "liveplex_engine_sessions_closed_total")
        assert ended.get('liveplex_engine_sessions_closed_total{reason="handed_over"}') == 2.0
        gaps = [b - a for call in calls for a, b in zip(call.arrivals, call.arrivals[1:])]
        print(f"longest gap between audio deltas: {max(gaps) * 1000:.0f} ms")


def test_with_no_other_pod_the_call_stays_and_drains_as_before(redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1) as p:
        async def scenario() -> None:
            ws = await websockets.connect(p.gateway.ws_url)
            await ws.send(orjson.dumps(START).decode())
            await until(ws, "session.started")
            drained: list[object] = []
            drain = threading.Thread(target=lambda: drained.append(
                platform.get_json(p.pods[0][0].admin_root + "/drain?deadline_s=30")))
            drain.start()
            platform.eventually(
                lambda: _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total").get(
                    'liveplex_gateway_session_moves_total{result="stayed"}') == 1.0, "the move to stay")
            await ws.send(orjson.dumps({"type": "session.close"}).decode())
            closed, seen = await until(ws, "session.closed")
            assert closed["reason"] == "close_requested"
            assert not [e for e in seen if e["type"] == "error"]
            await asyncio.to_thread(drain.join, 10)
            assert drained == [{"drained": True, "ended_at_deadline": 0}]
        asyncio.run(scenario())


def test_a_call_no_pod_can_take_is_lost_and_every_slot_it_reserved_is_given_back(redis_url, tmp_path) -> None:
    """Each pod refuses the others' blobs (their echoes differ): the move offers the exported call to
    both others, then loses it; the slots reserved on them come back at once, not when leases lapse."""
    each = [("--echo-frames", str(n)) for n in (3, 4, 5)]
    with platform.platform(redis_url, tmp_path, n_pods=3, each_pod=each) as p:
        async def scenario() -> tuple[dict, dict]:
            ws, _ = await clients.started(p.gateway.ws_url)
            platform.eventually(lambda: sum(p.pod_sessions()) == 1, "the call on a pod")
            source = p.pod_sessions().index(1)
            await asyncio.to_thread(platform.get_json, p.pods[source][0].admin_root + "/drain?deadline_s=10")
            error, _ = await until(ws, "error")
            closed, _ = await until(ws, "session.closed")
            async with PlacementClient(redis_url) as client, asyncio.timeout(3):  # a lease lasts 10 s
                while (await client.totals(platform.POOL)).reserved:
                    await asyncio.sleep(0.05)
            return error, closed

        error, closed = asyncio.run(scenario())
        assert (error["error"]["code"], closed["reason"]) == ("server_error", "connection_lost")
        moves = _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total")
        assert moves['liveplex_gateway_session_moves_total{result="lost"}'] == 1.0
