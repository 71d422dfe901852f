"""A WebRTC call with GPT-Live's `wake_policy` and `idle_timeout_s` (issue 43, docs/pause.md): an
aiortc caller whose microphone is the shipped recording, the create through the official SDK's
`client.live.create`, on a lone sim pod and through a gateway to its pod. Connected and billed as
paused until the caller speaks; its speech wakes it (`session.resumed`, the echo heard); after
`idle_timeout_s` of silence it pauses (`session.paused`); the sideband gets both, the data
channel only what `client.data_channel` lets through; usage splits into active and paused
seconds that add up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import openai
import orjson
import pytest
import websockets

from liveplex.gptlive import start
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


async def _wakes_and_pauses(base_url: str, waiting: Callable[[], None] = lambda: None,
                            woken: Callable[[], None] = lambda: None) -> None:
    """The call's life through `base_url` (`/v1`); `waiting` and `woken` check the pod meanwhile."""
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
        waiting()
        voice.speak(1.2)
        _, before = await caller.until("session.resumed", timeout_s=5)
        assert "session.paused" not in [e["type"] for e in before]  # the first wake follows no pause
        await _next(side, "session.resumed", timeout_s=1)
        await asyncio.sleep(1.0)  # the echo of the pre-roll and the speech after it
        assert np.abs(caller.samples(1.0)).max() > 3000
        paused = await _next(side, "session.paused", timeout_s=5)  # 1 s of silence after the speech
        assert "session.resumed" not in [e["type"] for e in paused]
        woken()
        caller.send({"type": "session.close"})
        closed, before = await caller.until("session.closed")
        assert {e["type"] for e in before} <= set(CHANNEL)  # the channel never saw session.paused
        usage = closed["usage"]
        assert usage["seconds"] == usage["active_seconds"] + usage["paused_seconds"]
        assert usage["paused_seconds"] >= 1 and usage["active_seconds"] >= 1  # the wait, and the pause
        assert (await _next(side, "session.closed"))[-1]["usage"] == usage
    await caller.close()


async def test_a_call_waits_paused_until_speech_wakes_it_and_pauses_after_its_idle_timeout() -> None:
    async with pods.in_process() as pod:
        assert pod.built is not None
        stats, engine = pod.built.pod.backend.pause_stats, pod.built.pod.engine

        def waiting() -> None:
            assert engine.pulse is not None
            assert (stats.paused, stats.waiting, engine.pulse.sessions) == (1, 1, 0)

        def woken() -> None:
            assert (stats.paused, stats.waiting, stats.wakes, stats.pauses, stats.refused_wakes) == (1, 0, 1, 1, 0)

        await _wakes_and_pauses(f"{pod.base_url}", waiting, woken)
        assert stats.paused == 0


def test_a_call_through_a_gateway_waits_wakes_and_pauses_on_its_pod(redis_url, tmp_path) -> None:
    """The fields travel in the session start the gateway relays; the pod runs the pause."""
    with platform.platform(redis_url, tmp_path, n_pods=1) as p:
        asyncio.run(_wakes_and_pauses(p.gateway.base_url, woken=lambda: None))
        platform.eventually(lambda: p.pod_sessions() == [0], "the pod to hold no session")


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
