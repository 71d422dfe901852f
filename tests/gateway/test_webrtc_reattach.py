"""A WebRTC call survives its gateway (issue 42, the WebRTC half). A caller re-offers with
`?session_id=` (and the last event it saw) on a new peer connection through the other gateway: first
while its gateway lives (a caller whose network changed: the call is taken over, its old peer
connection closed, its record kept), then after that gateway is SIGKILLed (its pod parks the
session, as it parks a socket's; the caller re-offers once it heard nothing for `STALL_S`). The
same session goes on (same id, audio again, no second `session.started`, no error, the events it
missed once each), its sideband finds the new replica, and the gap it heard is measured. Another
API key, an unknown id: 404 `session_not_found` on `session_id`.

Real processes: Redis, a sim pod, two gateways with keys and `--peer-url`s; aiortc callers; the SDK's
`live.create` with `extra_query` (its create body has no room for an id: docs/webrtc.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import orjson
import pytest
import redis

from liveplex.placement import keys
from tests.gateway.test_moves import _metric
from tests.support import platform, pods, webrtc

pytestmark = pytest.mark.timeout(120)

KEY, OTHER = "key-one", "key-two"
MODEL = {"model": "gpt-live-1"}
STALL_S = 0.6
"""No agent audio for this long: the caller takes its call for lost and re-offers (the demo page's
rule, `app.js`'s `STALL_MS`; the sim's agent sends a frame every 80 ms, silence included)."""


def _gateway_flags(keys_file: Path, port: int) -> tuple[str, ...]:
    return ("--api-key-file", str(keys_file), "--port", str(port), "--peer-url", f"ws://127.0.0.1:{port}")


@contextlib.contextmanager
def _two_gateways(redis_url: str, tmp_path: Path) -> Iterator[tuple[platform.Platform, pods.Running, int]]:
    """A sim pod (usage every 500 ms) behind gateway A (the platform's) and gateway B (and B's port),
    both taking `KEY` and `OTHER`."""
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"{KEY}\n{OTHER}\n")
    a_port, b_port = pods.free_port(), pods.free_port()
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--usage-period-ms", "500"),
                           gateway_flags=_gateway_flags(keys_file, a_port)) as p, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *_gateway_flags(keys_file, b_port),
                                log=tmp_path / "gateway-b.log", command="gateway") as (b, _):
        yield p, b, b_port


async def _create(base_url: str, key: str, caller: webrtc.Caller, **query: str) -> str:
    """`client.live.create` of `caller`'s offer (a re-offer with `session_id` in `query`); the
    answer applied; the session id."""
    async with openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0) as sdk:
        created = await sdk.live.create(session=MODEL, transport={"type": "webrtc", "sdp": await caller.offer()},
                                        extra_query=query or None)
    await caller.accept(created.transport.sdp)
    return created.session.id


async def _refused(base_url: str, key: str, session_id: str) -> dict:
    """A re-offer that is refused: its error body."""
    caller = webrtc.Caller()
    try:
        with pytest.raises(openai.NotFoundError) as refused:
            await _create(base_url, key, caller, session_id=session_id)
    finally:
        await caller.close()
    assert refused.value.status_code == 404
    return refused.value.body  # type: ignore[return-value]


def _drained(caller: webrtc.Caller) -> list[dict]:
    seen = []
    while not caller.events.empty():
        seen.append(caller.events.get_nowait())
    return seen


async def _stalled(caller: webrtc.Caller) -> None:
    """Until `caller` has heard nothing for `STALL_S`."""
    while not caller.arrivals or time.monotonic() - caller.arrivals[-1] < STALL_S:
        await asyncio.sleep(0.02)


def test_a_webrtc_call_continues_through_another_gateway_after_its_gateway_is_killed(
        redis_url: str, tmp_path: Path) -> None:
    with _two_gateways(redis_url, tmp_path) as (p, b, b_port):
        store = redis.Redis.from_url(redis_url, decode_responses=True)

        async def scenario() -> float:
            first = webrtc.Caller(hz=440)
            session_id = await _create(b.base_url, KEY, first)
            started, _ = await first.until("session.started")
            assert started["session"]["id"] == session_id
            await asyncio.sleep(1.0)
            assert webrtc.power_at(first.samples(0.4), 440) > 0.9  # the echo, through B
            record = orjson.loads(store.get(keys.SESSION_PREFIX + session_id) or "null")
            assert record is not None and record["pod"] == "pod-0"  # recorded as a socket's session is
            before = [started, *_drained(first)]  # what the caller saw: it is told the ones after

            # its network changed: a re-offer through A while B still holds the call takes it over
            second = webrtc.Caller(hz=440)
            assert await _create(p.gateway.base_url, KEY, second, session_id=session_id,
                                 last_event_id=before[-1]["event_id"]) == session_id
            await asyncio.wait_for(first.closed.wait(), 5)  # B let go of the old call
            await asyncio.sleep(1.0)
            assert webrtc.power_at(second.samples(0.4), 440) > 0.9  # the echo, through A
            assert store.get(keys.SESSION_PREFIX + session_id) is not None  # B's end left the record
            before += _drained(second)

            p.gateway_process.send_signal(signal.SIGKILL)  # A dies under the call
            await _stalled(second)
            last_heard = second.arrivals[-1]
            before += _drained(second)
            third = webrtc.Caller(hz=440)  # a new peer connection: the old one's far end is gone
            assert await _create(b.base_url, KEY, third, session_id=session_id,
                                 last_event_id=before[-1]["event_id"]) == session_id
            while not third.arrivals:
                await asyncio.sleep(0.01)
            gap = third.arrivals[0] - last_heard
            reattaches = _metric(p.pods[0][0].admin_root, "liveplex_engine_reattaches_total")
            assert reattaches['liveplex_engine_reattaches_total{result="parked"}'] == 1.0  # parked, then taken back
            assert reattaches['liveplex_engine_reattaches_total{result="taken_over"}'] == 1.0  # from B, alive

            for session, key in ((session_id, OTHER), ("sess_unknown", KEY)):
                error = (await _refused(b.base_url, key, session))
                assert (error["code"], error["param"]) == ("session_not_found", "session_id")
            await asyncio.sleep(1.0)
            assert webrtc.power_at(third.samples(0.4), 440) > 0.9  # the echo of the new call's audio
            assert store.get(keys.CALL_PREFIX + session_id) == f"ws://127.0.0.1:{b_port}"

            async with openai.AsyncOpenAI(base_url=b.base_url, api_key=KEY, max_retries=0) as sdk, \
                    sdk.live.sideband.connect(session_id=session_id, max_retries=0) as side:
                told = await side.recv()
                assert (told.type, told.session.id) == ("session.started", session_id)
                await side.send({"type": "session.close", "event_id": "bye"})
                closed, after = await third.until("session.closed")
            assert closed["session"]["id"] == session_id and closed["reason"] == "close_requested"
            assert not any(e["type"] in ("session.started", "error") for e in after)
            ids = [e["event_id"] for e in before + after]
            assert len(ids) == len(set(ids))  # none twice
            usage = [e["usage"]["seconds"] for e in before + after if e["type"] == "session.usage.updated"]
            assert usage == sorted(usage) and all(b - a < 0.6 for a, b in zip(usage, usage[1:]))  # none lost
            assert any(u >= 3.0 for u in usage)  # its time went on through the gap, counted once
            assert closed["usage"]["seconds"] >= usage[-1]
            await asyncio.gather(first.close(), second.close(), third.close())
            return gap

        gap = asyncio.run(scenario())
        platform.eventually(lambda: p.pod_sessions() == [0], "the pod to hold no session")
        print(f"gap heard across the gateway's SIGKILL: {gap * 1000:.0f} ms (stall detection {STALL_S * 1000:.0f} ms)")
        assert gap < 2.0


async def test_a_lone_pod_continues_no_call_and_says_so() -> None:
    """A re-offer to a lone `liveplex serve` (no gateway, no records): 404 `session_not_found`, and
    nothing is started or held (not a fresh session under another id)."""
    async with pods.in_process() as pod:
        assert pod.built is not None
        error = await _refused(pod.base_url, "x", "sess_unknown")
        assert (error["code"], error["param"]) == ("session_not_found", "session_id")
        stats = pod.built.pod.front.stats
        assert stats.sockets_open == 0 and not pod.built.pod.front.calls


def test_a_stopping_gateway_hands_its_webrtc_call_back_and_the_caller_re_offers(redis_url: str,
                                                                                tmp_path: Path) -> None:
    """A rollout under a WebRTC call: SIGTERM to its gateway parks the session on its pod and closes
    the call without `session.closed` (what the caller reads as "re-offer", not as the end), so the
    gateway is gone in moments instead of waiting for the call; the caller re-offers, without
    `last_event_id`, through the other gateway, and misses no event."""
    with _two_gateways(redis_url, tmp_path) as (p, b, _):

        async def scenario() -> None:
            first = webrtc.Caller(hz=440)
            session_id = await _create(p.gateway.base_url, KEY, first)
            started, _ = await first.until("session.started")
            await asyncio.sleep(1.0)
            stopping = time.monotonic()
            p.gateway_process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(first.closed.wait(), 5)  # handed back: the channel closed...
            before = [started, *_drained(first)]
            assert not any(e["type"] in ("session.closed", "error") for e in before)  # ...without an end
            second = webrtc.Caller(hz=440)
            assert await _create(b.base_url, KEY, second, session_id=session_id) == session_id
            await asyncio.to_thread(p.gateway_process.wait, 10)
            assert time.monotonic() - stopping < 5  # the drain did not wait for the call
            await asyncio.sleep(1.0)
            assert webrtc.power_at(second.samples(0.4), 440) > 0.9  # the echo, through B
            second.send({"type": "session.close", "event_id": "bye"})
            closed, after = await second.until("session.closed")
            assert closed["reason"] == "close_requested"
            assert not any(e["type"] in ("session.started", "error") for e in after)
            ids = [e["event_id"] for e in before + after]
            assert len(ids) == len(set(ids))  # none twice
            usage = [e["usage"]["seconds"] for e in before + after if e["type"] == "session.usage.updated"]
            assert usage == sorted(usage) and all(b - a < 0.6 for a, b in zip(usage, usage[1:]))  # none lost
            await asyncio.gather(first.close(), second.close())

        asyncio.run(scenario())
        platform.eventually(lambda: p.pod_sessions() == [0], "the pod to hold no session")
