"""A paused session moves like a running one (issue 43, docs/pause.md "Moves"): real sim pods and a
gateway over real Redis. A wake that finds its pod full is moved to a pod with a free slot and
heard there, no wake refused; a draining pod hands its paused sessions over, and they wake on the
next pod, their usage going on across the move (its paused time neither restarted nor counted
twice); a call waiting for its first speech moves too, and waits on the next pod."""

from __future__ import annotations

import asyncio
import base64
import itertools

import orjson
import pytest
import websockets

from liveplex.live import frames
from tests.pod.test_pause import SILENCE, append, speech, stream
from tests.support import clients, platform

PAUSING = ("--idle-pause-s", "1", "--max-sessions", "2", "--wake-reserve", "0")
"""Every WebSocket session pauses after 1 s of quiet; two slots, none kept for wakes: a pod whose
two slots run fills while a session is paused on it."""


def _pause_stats(root: str) -> dict:
    return platform.get_json(root + "/live/stats")  # type: ignore[return-value]


async def _paused(ws: websockets.ClientConnection) -> float:
    """Quiet until the pod says `session.paused`; when it did (the loop's clock)."""
    sender = asyncio.create_task(stream(ws, [SILENCE] * 60))
    await clients.until(ws, "session.paused", timeout=8)
    sender.cancel()
    return asyncio.get_running_loop().time()


async def _heard_again(ws: websockets.ClientConnection) -> tuple[list[dict], float]:
    """The caller speaks: `session.resumed` (when: the loop's clock), then the echo of its speech
    (loud audio)."""
    sender = asyncio.create_task(stream(ws, speech()))
    _, seen = await clients.until(ws, "session.resumed", timeout=10)
    resumed_at = asyncio.get_running_loop().time()
    loud = 0
    async with asyncio.timeout(10):
        while loud < 3:
            event = orjson.loads(await ws.recv())
            seen.append(event)
            if event["type"] == "session.output_audio.delta" and any(base64.b64decode(event["delta"])):
                loud += 1
    await sender
    return seen, resumed_at


async def _talking(ws: websockets.ClientConnection) -> None:
    """A caller who never stops talking (never paused), reading what comes back."""
    async def read() -> None:
        async for _ in ws:
            pass
    reader = asyncio.create_task(read())
    try:
        for chunk in itertools.cycle(speech()):
            await ws.send(append(chunk))
            await asyncio.sleep(frames.FRAME_MS / 1000)
    finally:
        reader.cancel()


def _moves(p: platform.Platform) -> float:
    from tests.gateway.test_moves import _metric
    return _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total").get(
        'liveplex_gateway_session_moves_total{result="moved"}', 0.0)


@pytest.mark.slow  # waits on MOVE_WAIT_S's wall clock: once in four runs too slow on a busy 2-core box
def test_a_wake_on_a_full_pod_moves_to_a_pod_with_a_free_slot_and_none_is_refused(redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=PAUSING) as p:
        async def scenario() -> tuple[list[dict], list[int]]:
            ws, _ = await clients.started(p.gateway.ws_url)
            await _paused(ws)
            fillers = [await clients.started(p.gateway.ws_url) for _ in range(2)]
            talking = [asyncio.create_task(_talking(f)) for f, _ in fillers]
            platform.eventually(lambda: p.pod_sessions() == [2], "the paused call's pod full")
            with platform.pod(redis_url, tmp_path, 1, PAUSING) as second:
                p.pods.append(second)
                platform.eventually(lambda: p.stats()["pods"] == 2, "the gateway to see the second pod")
                seen, _ = await _heard_again(ws)
                for t in talking:
                    t.cancel()
                await ws.close()
                return seen, [_pause_stats(r.admin_root)["refused_wakes"] for r, _ in p.pods]  # while both run

        seen, refused = asyncio.run(scenario())
        assert not [e for e in seen if e["type"] == "error"], seen
        assert _moves(p) == 1.0  # through the gateway's move, not a slot freed on the full pod
        assert refused == [0, 0]


def test_a_draining_pods_paused_session_moves_and_wakes_on_the_next_pod(redis_url, tmp_path) -> None:
    """...and its usage goes on: paused `paused_s` on each pod, the `session.closed` it gets on
    the next pod counts the whole pause once (a restart would lose the first pod's part, a double
    count add it twice) and the session's whole wall-clock time."""
    paused_s = 1.2  # on each pod: a restart or a double count is off by more than a second
    with platform.platform(redis_url, tmp_path, n_pods=2, pod_flags=PAUSING) as p:
        async def scenario() -> tuple[list[dict], int, object, dict, float, float]:
            loop = asyncio.get_running_loop()
            began = loop.time()
            ws, _ = await clients.started(p.gateway.ws_url)
            paused_at = await _paused(ws)
            await asyncio.sleep(paused_s)
            source = [_pause_stats(r.admin_root)["paused"] for r, _ in p.pods].index(1)
            drained = await asyncio.to_thread(
                platform.get_json, p.pods[source][0].admin_root + "/drain?deadline_s=30")
            target = p.pods[1 - source][0].admin_root
            await asyncio.to_thread(platform.eventually, lambda: _pause_stats(target)["paused"] == 1,
                                    "the session to wait on the next pod, paused")
            await asyncio.sleep(paused_s)
            seen, resumed_at = await _heard_again(ws)
            await ws.send(orjson.dumps({"type": "session.close"}).decode())
            closed, _ = await clients.until(ws, "session.closed")
            ended = loop.time()
            await ws.close()
            return seen, source, drained, closed["usage"], resumed_at - paused_at, ended - began

        seen, source, drained, usage, paused, whole = asyncio.run(scenario())
        assert drained == {"drained": True, "ended_at_deadline": 0}  # moved, not ended at the deadline
        assert not [e for e in seen if e["type"] in ("error", "session.paused")], seen
        assert _moves(p) == 1.0
        assert _pause_stats(p.pods[1 - source][0].admin_root)["wakes"] == 1
        # whole seconds, paused rounded down (the pod counts it in whole frames from its own clock)
        assert paused - 1 < usage["paused_seconds"] <= paused + 0.5, (usage, paused)
        assert whole - 1.5 < usage["seconds"] <= whole + 0.5, (usage, whole)
        assert usage["active_seconds"] == usage["seconds"] - usage["paused_seconds"]


def test_a_draining_pods_waiting_call_moves_and_its_first_speech_wakes_it_on_the_next_pod(redis_url, tmp_path) -> None:
    """A WebRTC call waiting for its first speech (it never ran: no engine state) moves off a
    draining pod as a blob with none, is held waiting on the next, and wakes and pauses there."""
    from tests.gptlive.test_webrtc_pause import _out, _wakes_and_pauses
    with platform.platform(redis_url, tmp_path, n_pods=2) as p:
        roots = [r.admin_root for r, _ in p.pods]
        drained: list[object] = []
        target: list[str] = []

        async def waiting() -> None:
            source = [_pause_stats(r)["waiting"] for r in roots].index(1)
            drained.append(await asyncio.to_thread(platform.get_json, roots[source] + "/drain?deadline_s=30"))
            target.append(roots[1 - source])
            await asyncio.to_thread(platform.eventually, lambda: _pause_stats(target[0])["waiting"] == 1,
                                    "the call to wait on the next pod")

        async def paused() -> None:
            _out(await asyncio.to_thread(_pause_stats, target[0]), waiting=0, paused=1, wakes=1, pauses=1)

        asyncio.run(_wakes_and_pauses(p.gateway.base_url, waiting, paused))
        assert drained == [{"drained": True, "ended_at_deadline": 0}]  # moved, not ended at the deadline
        assert _moves(p) == 1.0
