"""A WebRTC call with GPT-Live's `wake_policy` and `idle_timeout_s` (issue 43, docs/pause.md): an
aiortc caller whose microphone is the shipped recording, the create through the official SDK's
`client.live.create`, on a lone sim pod and through a gateway to its pod. Connected and billed as
paused until the caller speaks; its speech wakes it (`session.resumed`, the echo heard); after
`idle_timeout_s` of silence it pauses (`session.paused`); the sideband gets both, the data
channel only what `client.data_channel` lets through; usage splits into active and paused
seconds that add up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import numpy as np
import openai
import orjson
import pytest
import redis
import websockets

from liveplex.gptlive import start
from liveplex.placement import keys
from tests.support import platform, pods, webrtc

pytestmark = pytest.mark.timeout(90)

WAKE = {"model": "gpt-live-1", "wake_policy": {"type": "speech", "vad_threshold": 0.5}, "idle_timeout_s": 1}
CHANNEL = ["session.started", "session.resumed", "session.closed", "session.usage.updated"]
"""What the caller's channel lets through in the test: not `session.paused` (the sideband gets it)."""


async def _next(side: websockets.ClientConnection, kind: str, timeout_s: float = 10.0) -> list[dict]:
    """The sideband's events up to and including the first of type `kind`."""
    seen: list[dict] = []
    async with asyncio.timeout(timeout_s):
        while not seen or seen[-1]["type"] != kind:
            seen.append(orjson.loads(await side.recv()))
    return seen


Check = Callable[[], Awaitable[None]]


async def _nothing() -> None:
    pass


async def _wakes_and_pauses(base_url: str, waiting: Check = _nothing, paused: Check = _nothing) -> None:
    """The call's life through `base_url` (`/v1`); `waiting` and `paused` check the pod meanwhile
    (before the first wake, and at the pause after it)."""
    voice = webrtc.Voice()
    caller = webrtc.Caller(track=voice)
    session = {**WAKE, "client": {"data_channel": {"allowed_server_events": CHANNEL}}}
    async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as sdk:
        created = await sdk.live.create(session=session, transport={"type": "webrtc", "sdp": await caller.offer()})
    await caller.accept(created.transport.sdp)
    await caller.until("session.started", timeout_s=15)
    attach = base_url.replace("http", "ws", 1) + f"/live/sessions/{created.session.id}/attach"
    async with websockets.connect(attach, additional_headers={"Authorization": "Bearer x"}) as side:
        assert (await _next(side, "session.started"))[-1]["session"]["id"] == created.session.id
        await asyncio.sleep(1.0)  # silent: connected, in no engine, nothing said
        await waiting()
        voice.speak(1.2)
        _, before = await caller.until("session.resumed", timeout_s=5)
        assert "session.paused" not in [e["type"] for e in before]  # the first wake follows no pause
        await _next(side, "session.resumed", timeout_s=1)
        await asyncio.sleep(1.0)  # the echo of the pre-roll and the speech after it
        assert np.abs(caller.samples(1.0)).max() > 3000
        before_pause = await _next(side, "session.paused", timeout_s=5)  # 1 s of silence after the speech
        assert "session.resumed" not in [e["type"] for e in before_pause]
        await paused()
        caller.send({"type": "session.close"})
        closed, before = await caller.until("session.closed")
        assert {e["type"] for e in before} <= set(CHANNEL)  # the channel never saw session.paused
        usage = closed["usage"]
        assert usage["seconds"] == usage["active_seconds"] + usage["paused_seconds"]
        assert usage["paused_seconds"] >= 1 and usage["active_seconds"] >= 1  # the wait, and the pause
        assert (await _next(side, "session.closed"))[-1]["usage"] == usage
    await caller.close()


def _out(stats: dict, waiting: int, paused: int, wakes: int, pauses: int) -> None:
    """The pod's `/live/stats` on its sessions out of the engine, and its wakes never refused."""
    assert (stats["waiting"], stats["paused"], stats["wakes"], stats["pauses"], stats["refused_wakes"]) == (
        waiting, paused, wakes, pauses, 0)


async def test_a_call_waits_paused_until_speech_wakes_it_and_pauses_after_its_idle_timeout() -> None:
    async with pods.in_process() as pod, httpx.AsyncClient(base_url=pod.admin_root) as admin:
        async def waiting() -> None:
            stats = (await admin.get("/live/stats")).json()
            _out(stats, waiting=1, paused=1, wakes=0, pauses=0)
            assert stats["sessions"] == 0  # in no engine

        async def paused() -> None:
            _out((await admin.get("/live/stats")).json(), waiting=0, paused=1, wakes=1, pauses=1)
            metrics = (await admin.get("/metrics")).text
            assert 'liveplex_engine_sessions_out{state="paused"} 1.0' in metrics
            assert "liveplex_engine_wakes_total 1.0" in metrics and "liveplex_engine_wakes_refused_total 0.0" in metrics
            assert "liveplex_engine_wake_latency_seconds_count 1.0" in metrics

        await _wakes_and_pauses(f"{pod.base_url}", waiting, paused)
        _out((await admin.get("/live/stats")).json(), waiting=0, paused=0, wakes=1, pauses=1)


def test_a_call_through_a_gateway_waits_wakes_and_pauses_on_its_pod(redis_url, tmp_path) -> None:
    """The fields travel in the session start the gateway relays; the pod runs the pause, and its
    heartbeat publishes the call as paused, not active (placement and autoscaling read `active`)."""
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--wake-reserve", "1")) as p:
        store = redis.Redis.from_url(redis_url, decode_responses=True)
        pod_key = keys.pool_keys(platform.POOL).pod("pod-0")

        def published(active: int, paused: int, capacity: int) -> bool:
            record = store.hgetall(pod_key)
            return (int(record["active"]), int(record["paused"]), int(record["capacity"])) == (active, paused, capacity)

        async def waiting() -> None:  # 64 slots, one kept for the waiting call's wake
            await asyncio.to_thread(platform.eventually, lambda: published(0, 1, 63), "the call published waiting")

        async def paused() -> None:
            _out(await asyncio.to_thread(platform.get_json, p.pods[0][0].admin_root + "/live/stats"),
                 waiting=0, paused=1, wakes=1, pauses=1)

        asyncio.run(_wakes_and_pauses(p.gateway.base_url, waiting, paused))
        platform.eventually(lambda: p.pod_sessions() == [0] and published(0, 0, 64), "the pod to hold no session")


async def test_a_pod_that_cannot_pause_refuses_the_fields_by_name_with_the_reason() -> None:
    """`--max-paused 0`: the pod holds no paused session, so it cannot honour a wake policy."""
    async with pods.in_process("--max-paused", "0") as pod:
        caller = webrtc.Caller()
        async with openai.AsyncOpenAI(base_url=pod.base_url, api_key="x", max_retries=0) as sdk:
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.live.create(session=WAKE, transport={"type": "webrtc", "sdp": await caller.offer()})
        body = refused.value.body
        assert isinstance(body, dict)
        assert (body["code"], body["param"]) == ("unsupported_parameter", "session.wake_policy")
        assert body["message"].endswith(start.NOT_PAUSING)
        await caller.close()
