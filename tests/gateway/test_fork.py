"""Forks of stored sessions (issue 45): over the fork socket (`/v1/live/sessions/{id}/fork`, then a
`session.start` carrying only a fork's overrides, openai 3.63 `ForkSessionConfig`) and onto a new
WebRTC call (`POST /v1/live/sessions/{id}/fork`, an aiortc caller's offer).

Real processes: Redis, two sim pods, a gateway with keys and a directory store; raw sockets as the
callers (the newest SDK's `client.live.forks.connect` is tests/clients/test_fork_sdk.py). A stored
call runs on one pod; a fork of it, taken while it runs, starts as a new session with the stored
settings and continues the stored conversation: the sim's words go on from where the stored record
left them ("I hear you loud..." does not start over), and the original call goes on untouched. Then
the original's pod is killed: the gateway resumes the call on the other pod, and it can still be
forked, over the socket and over WebRTC. Another key and an unknown id are `session_not_found`
(close 1008; 404 for WebRTC); an override GPT-Live does not allow (`model`; `audio` on WebRTC) is
refused by name and the socket stays open for a good start; a socket's fork may change its format.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx
import orjson
import pytest
import websockets

from liveplex.sim_pod.echo import WORDS
from tests.gateway.test_moves import _metric
from tests.support import clients, platform, pods, webrtc

pytestmark = pytest.mark.timeout(120)

KEY, OTHER = "fork-key", "other-key"
BEARER = {"Authorization": f"Bearer {KEY}"}


def _fork_url(gateway: pods.Running, session_id: str) -> str:
    return f"{gateway.ws_url}/{session_id}/fork"


def _words(seen: list[dict]) -> list[str]:
    return [e["delta"].strip() for e in seen if e["type"] == "session.output_transcript.delta"]


def test_a_stored_call_is_forked_while_it_runs_and_after_its_pod_dies(redis_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n{OTHER}\n")
    flags = ("--api-key-file", str(keys), "--store-dir", str(tmp_path / "store"), "--store-flush-s", "0.3")
    with platform.platform(redis_url, tmp_path, n_pods=2, gateway_flags=flags) as running:
        asyncio.run(_forks(running))


async def _forks(running: platform.Platform) -> None:
    gateway = running.gateway
    stored_start = {"type": "session.start", "session": {"model": "gpt-live-1", "instructions": "Be brief.",
                                                          "store": True}}
    began = time.time()
    original, started = await clients.started(gateway.ws_url, BEARER, stored_start)
    longest_s = started["session"]["expires_at"] - began  # a session's whole time
    session_id = started["session"]["id"]
    said, _ = await clients.events_while_speaking(original, 2.5)
    assert _words(said)[:3] == list(WORDS[:3])
    await asyncio.sleep(0.8)  # the store has it all

    assert (await clients.refused(_fork_url(gateway, session_id), OTHER))["code"] == "session_not_found"
    assert (await clients.refused(_fork_url(gateway, "sess_unknown"), KEY))["code"] == "session_not_found"

    fork = await websockets.connect(_fork_url(gateway, session_id), additional_headers=BEARER, max_queue=None)
    await fork.send(orjson.dumps({"type": "session.start", "event_id": "f0", "session": {"model": "x"}}).decode())
    refused, _ = await clients.until(fork, "error")
    assert (refused["error"]["code"], refused["error"]["param"]) == ("unsupported_parameter", "session.model")
    await fork.send(orjson.dumps({"type": "session.start", "event_id": "f1", "session": {
        "audio": {"format": {"type": "audio/pcm", "rate": 16000}}}}).decode())
    forked, _ = await clients.until(fork, "session.started")
    resource = forked["session"]
    assert resource["id"] != session_id and forked["client_event_id"] == "f1"
    assert (resource["model"], resource["instructions"], resource["store"]) == ("gpt-live-1", "Be brief.", True)
    assert resource["audio"]["format"] == {"type": "audio/pcm", "rate": 16000}
    assert resource["expires_at"] <= time.time() + longest_s - 2  # the stored seconds are spent
    heard, _ = await clients.events_while_speaking(fork, 1.2)
    words = _words(heard)
    assert words and words[0] != WORDS[0], words  # the stored conversation goes on: no fresh start
    still, deltas = await clients.events_while_speaking(original, 0.8)
    assert deltas > 5 and not any(e["type"] in ("error", "session.closed") for e in still)  # untouched
    await fork.close()

    # The original's pod dies: the gateway resumes the call on the other pod; it forks still.
    stats = [platform.get_json(p.admin_root + "/live/stats") for p, _ in running.pods]
    serving = next(i for i, s in enumerate(stats) if s["sessions"])  # type: ignore[index]
    running.pods[serving][1].send_signal(signal.SIGKILL)
    after, deltas = await clients.events_while_speaking(original, 1.5)
    assert deltas > 5 and not any(e["type"] in ("error", "session.closed") for e in after)
    again = await websockets.connect(_fork_url(gateway, session_id), additional_headers=BEARER, max_queue=None)
    await again.send(orjson.dumps({"type": "session.start", "session": {"store": False}}).decode())
    forked, _ = await clients.until(again, "session.started")
    assert forked["session"]["store"] is False
    _, deltas = await clients.events_while_speaking(again, 0.6)
    assert deltas > 3
    await again.close()
    await _webrtc_forks(gateway, session_id)
    await original.close()
    forks = _metric(gateway.admin_root, "liveplex_gateway_forks_total")
    assert forks == {f'liveplex_gateway_forks_total{{result="{result}"}}': n
                     for result, n in (("failed", 0.0), ("refused", 4.0), ("started", 3.0))}


async def _webrtc_forks(gateway: pods.Running, session_id: str) -> None:
    """`POST /v1/live/sessions/{id}/fork` (`client.live.sessions.fork`): refusals as the SDK reads
    them (an OpenAI error body); then a stored WebRTC call whose data channel carries only the
    session's start and end is forked onto a new call that names no `client`: the fork's
    `session.started` on its channel, the sim's echo heard, and no transcript on the channel (the
    stored call's permissions, inherited)."""
    url = f"{gateway.base_url}/live/sessions/{{}}/fork"
    quiet = {"data_channel": {"allowed_server_events": ["session.started", "session.closed"]}}
    stored_caller, caller = webrtc.Caller(), webrtc.Caller()
    body = {"transport": {"type": "webrtc", "sdp": await caller.offer()}, "session": {}}
    async with httpx.AsyncClient(timeout=10, headers=BEARER) as http:
        for sid, key, override, status, code in (
                (session_id, OTHER, {}, 404, "session_not_found"),
                ("sess_unknown", KEY, {}, 404, "session_not_found"),
                (session_id, KEY, {"audio": {"format": {"type": "audio/pcmu"}}}, 400, "unsupported_parameter")):
            refused = await http.post(url.format(sid), json={**body, "session": override},
                                      headers={"Authorization": f"Bearer {key}"})
            assert (refused.status_code, refused.json()["error"]["code"]) == (status, code), refused.text
        created = await http.post(f"{gateway.base_url}/live/sessions", json={
            "transport": {"type": "webrtc", "sdp": await stored_caller.offer()},
            "session": {"model": "gpt-live-1", "store": True, "client": quiet}})
        assert created.status_code == 200, created.text
        await stored_caller.accept(created.json()["transport"]["sdp"])
        await stored_caller.until("session.started")
        await asyncio.sleep(1.5)  # its tone heard and stored
        stored_id = created.json()["session"]["id"]
        answered = await http.post(url.format(stored_id), json=body)
    assert answered.status_code == 200, answered.text
    forked = answered.json()
    assert forked["session"]["id"] not in (stored_id, "") and forked["transport"]["type"] == "webrtc"
    await caller.accept(forked["transport"]["sdp"])
    started, _ = await caller.until("session.started")
    assert started["session"]["id"] == forked["session"]["id"] and started["session"]["store"] is True
    await asyncio.sleep(1.5)
    assert len(caller.heard) > 30  # its audio flows
    assert caller.events.empty()  # no transcript, no usage: the stored call's channel permissions
    for call in (caller, stored_caller):
        await call.close()
