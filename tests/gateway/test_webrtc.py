"""WebRTC calls through the gateway: real redis-server, sim pod and gateway processes, an aiortc
caller, the SDP exchange through the SDK. The gateway answers the offer, places the session as it
places a socket's, and bridges the call to its pod over the usual gateway-pod WebSocket hop, so
moves off a draining pod carry WebRTC calls as they carry sockets."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import subprocess
import time

import httpx
import openai
import pytest
import redis
import trustme
import websockets

from liveplex.placement import keys
from tests.gateway.test_moves import _metric
from tests.support import platform, pods, webrtc

pytestmark = pytest.mark.timeout(180)

MODEL = {"model": "gpt-live-1"}


async def _call(base_url: str, caller: webrtc.Caller) -> str:
    async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as sdk:
        created = await sdk.live.create(session=MODEL, transport={"type": "webrtc", "sdp": await caller.offer()})
    await caller.accept(created.transport.sdp)
    return created.session.id



async def _held_call(sdk: openai.AsyncOpenAI, caller: webrtc.Caller, store: redis.Redis, holder: str) -> str:
    """A call created through `sdk`, recorded in Redis as held at `holder`, connected and started."""
    created = await sdk.live.create(session=MODEL, transport={"type": "webrtc", "sdp": await caller.offer()})
    assert store.get(keys.CALL_PREFIX + created.session.id) == holder
    await caller.accept(created.transport.sdp)
    await caller.until("session.started")
    return created.session.id


async def _mute_then_close(side, caller: webrtc.Caller) -> None:
    """Steer a call from its sideband: mute it (the caller hears it muted), then close it."""
    await side.send({"type": "session.input_audio.mute", "event_id": "m"})
    while (event := await asyncio.wait_for(side.recv(), 10)).type != "session.input_audio.muted":
        pass
    assert event.client_event_id == "m"
    await caller.until("session.input_audio.muted")
    await side.send({"type": "session.close", "event_id": "c"})
    while (event := await asyncio.wait_for(side.recv(), 10)).type != "session.closed":
        pass

def test_a_webrtc_call_through_the_gateway_is_echoed_and_placed_like_a_socket(redis_url, tmp_path) -> None:
    """The echo heard over RTP through the gateway and its pod; `session.started` carries the id
    the gateway placed; a full pool is `server_busy` as an HTTP error; a sideband attached to the
    gateway mutes and closes the call; the end frees the slot."""
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--max-sessions", "1")) as p:
        async def scenario() -> None:
            caller = webrtc.Caller(hz=440)
            session_id = await _call(p.gateway.base_url, caller)
            started, before = await caller.until("session.started")
            assert before == [] and started["session"]["id"] == session_id
            await asyncio.sleep(2.0)
            assert webrtc.power_at(caller.samples(1.0), 440) > 0.9
            assert p.pod_sessions() == [1]
            with pytest.raises(openai.InternalServerError) as busy:
                await _call(p.gateway.base_url, webrtc.Caller())
            assert busy.value.status_code == 503 and busy.value.body["code"] == "server_busy"
            # the sideband is the gateway's, which holds the call; the pod answers what it sends
            async with openai.AsyncOpenAI(base_url=p.gateway.base_url, api_key="x", max_retries=0) as sdk, \
                    sdk.live.sideband.connect(session_id=session_id, max_retries=0) as side:
                first = await side.recv()
                assert (first.type, first.session.id) == ("session.started", session_id)
                await _mute_then_close(side, caller)
            closed, _ = await caller.until("session.closed")
            assert closed["reason"] == "close_requested" and closed["session"]["id"] == session_id
            await caller.close()
        asyncio.run(scenario())
        platform.eventually(lambda: p.pod_sessions() == [0] and p.stats()["sessions"] == 0,
                            "the pod and the gateway to hold no session")
        log = (tmp_path / "gateway.log").read_text()  # ICE's routine steps are aioice's info lines
        assert '"logger": "aioice' not in log, log


MOVE_SILENCE_S = 2.0
"""The longest silence a move may cost the caller: about 50 ms on a quiet machine, 0.74 s heard
(1.2 s by the pods' frames) on a starved one, where each of the move's round trips between three
processes waits to be scheduled. It bounds a move that waits on a timeout, not a slow machine."""


def test_a_webrtc_call_moves_off_a_draining_pod(redis_url, tmp_path) -> None:
    """The call's pod drains: the gateway moves the session to the other pod, the caller hears
    the echo on without a word on the channel, and the longest silence is measured. The flow is
    judged once the other pod runs the call: the drain returns when the old pod handed the call
    over, so a window from there holds the move's own silence, which a starved machine stretched
    past a fifth of it (0.35 heard with a 0.74 s gap)."""
    with platform.platform(redis_url, tmp_path, pod_flags=("--lateness-budget-ms", "1000")) as p:
        async def scenario() -> tuple[list[dict], float, float, float]:
            caller = webrtc.Caller(hz=440)
            await _call(p.gateway.base_url, caller)
            await caller.until("session.started")
            platform.eventually(lambda: sorted(p.pod_sessions()) == [0, 1], "the call on one pod")
            source = p.pod_sessions().index(1)
            await asyncio.sleep(1.0)
            gap_before = caller.longest_gap_s()
            draining = time.monotonic()
            drained = await asyncio.to_thread(
                platform.get_json, p.pods[source][0].admin_root + "/drain?deadline_s=30")
            assert drained == {"drained": True, "ended_at_deadline": 0}
            await asyncio.to_thread(platform.eventually, lambda: p.pod_sessions()[1 - source] == 1,
                                    "the call on the other pod")
            heard_before = len(caller.samples())
            began = time.monotonic()
            await asyncio.sleep(2.0)
            share = (len(caller.samples()) - heard_before) / webrtc.RATE / (time.monotonic() - began)
            tone = webrtc.power_at(caller.samples(1.0), 440)
            gap = caller.longest_gap_s(draining)
            print(f"longest gap heard: {gap * 1000:.0f} ms from the drain on, {gap_before * 1000:.0f} ms before it")
            seen = []
            while not caller.events.empty():
                seen.append(caller.events.get_nowait())
            caller.send({"type": "session.close"})
            await caller.until("session.closed")
            await caller.close()
            return seen, tone, share, gap

        seen, tone, share, gap = asyncio.run(scenario())
        assert [e for e in seen if e["type"] in ("error", "session.closed")] == []
        assert tone > 0.9  # still the echo, from the new pod
        assert share > 0.8  # audio flows from the new pod
        assert gap < MOVE_SILENCE_S


def test_a_webrtc_call_whose_pod_is_killed_resumes_on_another(redis_url, tmp_path) -> None:
    """SIGKILL the call's pod: the gateway resumes the session on the other pod from its
    checkpoints, the caller hears the echo again after a short silence, never an error, and the
    call ends as it asks."""
    with platform.platform(redis_url, tmp_path, pod_flags=("--lateness-budget-ms", "1000")) as p:
        async def scenario() -> tuple[list[dict], float]:
            caller = webrtc.Caller(hz=440)
            await _call(p.gateway.base_url, caller)
            await caller.until("session.started")
            platform.eventually(lambda: sorted(p.pod_sessions()) == [0, 1], "the call on one pod")
            victim = p.pods[p.pod_sessions().index(1)][1]
            await asyncio.sleep(1.5)
            killed = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            await asyncio.sleep(3.0)
            tone = webrtc.power_at(caller.samples(1.0), 440)
            assert tone > 0.9, tone  # the echo, from the other pod
            gap = caller.longest_gap_s(killed - 0.1)
            seen = []
            while not caller.events.empty():
                seen.append(caller.events.get_nowait())
            caller.send({"type": "session.close"})
            closed, _ = await caller.until("session.closed")
            assert closed["reason"] == "close_requested"
            await caller.close()
            return seen, gap

        seen, gap = asyncio.run(scenario())
        assert [e for e in seen if e["type"] in ("error", "session.closed")] == []
        moves = _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total")
        assert moves['liveplex_gateway_session_moves_total{result="resumed"}'] == 1.0
        print(f"longest gap heard around the kill: {gap * 1000:.0f} ms")


def test_a_sideband_reaching_another_gateway_replica_is_relayed_to_the_one_holding_the_call(
        redis_url, tmp_path) -> None:
    """Two gateway replicas on one Redis, each with its `--peer-url`: the call is created on A
    (its media ends there, recorded in Redis under A's URL); the SDK's sideband reaches B, which
    relays it to A: `session.started` replayed, a mute steering the call, A's refusals passed
    through as they are (a second attach: 409 on either replica), B's own (another key: 401, an
    unknown id: 404), the call's end closing the relayed sideband with 1000, and the record gone
    after it."""
    a_port, b_port = pods.free_port(), pods.free_port()
    replica = ("--api-key", "k")
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=(
            *replica, "--port", str(a_port), "--peer-url", f"ws://127.0.0.1:{a_port}")) as p, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *replica, "--port", str(b_port),
                                "--peer-url", f"ws://127.0.0.1:{b_port}", log=tmp_path / "gateway-b.log",
                                command="gateway") as (b, _):
        store = redis.Redis.from_url(redis_url, decode_responses=True)

        async def scenario() -> str:
            caller = webrtc.Caller(hz=440)
            async with openai.AsyncOpenAI(base_url=p.gateway.base_url, api_key="k", max_retries=0) as sdk:
                session_id = await _held_call(sdk, caller, store, f"ws://127.0.0.1:{a_port}")
            attach = "ws://{}/v1/live/sessions/{}/attach"
            for session, key, status in ((session_id, "nope", 401), ("sess_0000", "k", 404)):
                with pytest.raises(websockets.InvalidStatus) as refused:
                    await websockets.connect(attach.format(b.address, session),
                                             additional_headers={"Authorization": f"Bearer {key}"})
                assert refused.value.response.status_code == status
            async with openai.AsyncOpenAI(base_url=b.base_url, api_key="k", max_retries=0) as sdk, \
                    sdk.live.sideband.connect(session_id=session_id, max_retries=0) as side:
                first = await side.recv()
                assert (first.type, first.session.id) == ("session.started", session_id)
                for where in (p.gateway, b):
                    with pytest.raises(websockets.InvalidStatus) as second:
                        await websockets.connect(attach.format(where.address, session_id),
                                                 additional_headers={"Authorization": "Bearer k"})
                    assert second.value.response.status_code == 409
                    assert b"sideband_already_attached" in second.value.response.body
                await _mute_then_close(side, caller)
                with pytest.raises(websockets.ConnectionClosedOK):  # the call's end: 1000, relayed
                    await asyncio.wait_for(side.recv(), 10)
            closed, _ = await caller.until("session.closed")
            assert closed["reason"] == "close_requested"
            await caller.close()
            return session_id

        session_id = asyncio.run(scenario())
        platform.eventually(lambda: store.get(keys.CALL_PREFIX + session_id) is None, "the call's record to go")
        platform.eventually(lambda: p.pod_sessions() == [0], "the pod to hold no session")


def test_a_sideband_reaching_another_replica_is_relayed_when_the_replicas_serve_tls(redis_url, tmp_path) -> None:
    """Replicas serving TLS with one certificate, made for a name and not their addresses (as a
    cert-manager certificate is): each records `wss://` with its address, and B relays a sideband
    to A trusting `--peer-ca` and checking `--peer-server-name`; C, trusting only the system's CAs,
    cannot reach A and answers 404 (its calls went with it), so the relay checks what it dials; D,
    serving plain (a rollout turning TLS on), has no TLS to reach A with and answers 404 too."""
    ca = trustme.CA()
    issued = ca.issue_cert("gateway.liveplex.test")
    cert, key, ca_file = tmp_path / "gateway.pem", tmp_path / "gateway.key", tmp_path / "ca.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())
    ca.cert_pem.write_to_path(str(ca_file))
    client_tls = ssl.create_default_context()  # the test's clients trust the CA, dialing by address
    ca.configure_trust(client_tls)
    client_tls.check_hostname = False
    serving = ("--api-key", "k", "--tls-cert", str(cert), "--tls-key", str(key))
    peers = ("--peer-ca", str(ca_file), "--peer-server-name", "gateway.liveplex.test")
    a_port, b_port, c_port, d_port = pods.free_port(), pods.free_port(), pods.free_port(), pods.free_port()

    def replica(port: int, name: str, *flags: str) -> contextlib.AbstractContextManager[
            tuple[pods.Running, subprocess.Popen[bytes]]]:
        return pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *serving, "--port", str(port),
                                   "--peer-url", f"wss://127.0.0.1:{port}", *flags,
                                   log=tmp_path / f"gateway-{name}.log", command="gateway")

    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=(
            *serving, "--port", str(a_port), "--peer-url", f"wss://127.0.0.1:{a_port}", *peers)) as p, \
            replica(b_port, "b", *peers) as (b, _), replica(c_port, "c") as (c, _), \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, "--api-key", "k", "--port",
                                str(d_port), "--peer-url", f"ws://127.0.0.1:{d_port}", log=tmp_path / "gateway-d.log",
                                command="gateway") as (d, _):
        store = redis.Redis.from_url(redis_url, decode_responses=True)

        async def scenario() -> None:
            caller = webrtc.Caller(hz=440)
            async with openai.AsyncOpenAI(base_url=f"https://{p.gateway.address}/v1", api_key="k", max_retries=0,
                                          http_client=httpx.AsyncClient(verify=client_tls)) as sdk:
                session_id = await _held_call(sdk, caller, store, f"wss://127.0.0.1:{a_port}")
            for attach, secure in ((f"wss://{c.address}", client_tls), (f"ws://{d.address}", None)):
                with pytest.raises(websockets.InvalidStatus) as unreached:
                    await websockets.connect(f"{attach}/v1/live/sessions/{session_id}/attach", ssl=secure,
                                             additional_headers={"Authorization": "Bearer k"})
                assert unreached.value.response.status_code == 404
            async with openai.AsyncOpenAI(base_url=f"https://{b.address}/v1", api_key="k", max_retries=0) as sdk, \
                    sdk.live.sideband.connect(session_id=session_id, max_retries=0,
                                              websocket_connection_options={"ssl": client_tls}) as side:  # type: ignore[typeddict-unknown-key]
                first = await side.recv()
                assert (first.type, first.session.id) == ("session.started", session_id)
                await _mute_then_close(side, caller)
            closed, _ = await caller.until("session.closed")
            assert closed["reason"] == "close_requested"
            await caller.close()

        asyncio.run(scenario())
        assert "sideband holder unreachable" in (tmp_path / "gateway-c.log").read_text()
        assert "sideband holder serves TLS, this replica has no peer TLS" in (tmp_path / "gateway-d.log").read_text()
