"""WebRTC calls on a lone pod (`liveplex serve`): an aiortc caller making its offer as a browser
does, the SDP exchange through the official SDK's `client.live.create` (the dev extra's openai
3.51, which has it), the echo heard over RTP, the events on the data channel through the same
`Connection`, and every refusal an HTTP error body the SDK raises."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import numpy as np
import openai
import pytest
import websockets
from aiortc import RTCConfiguration, RTCIceServer, RTCIceTransportPolicy

from liveplex.gptlive.server.webrtc import call, ice
from tests.support import pods, turn, webrtc

pytestmark = pytest.mark.timeout(90)

MODEL = {"model": "gpt-live-1"}


async def _stats(pod: pods.Running) -> dict:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{pod.admin_root}/live/stats")).json()


async def _idle(pod: pods.Running, timeout_s: float = 10.0) -> dict[str, int]:
    """How the pod's sessions ended, once no session and no call is left on it (the engine's
    slots, the front's sockets, the peer connections being closed); fails past `timeout_s`."""
    assert pod.built is not None
    async with asyncio.timeout(timeout_s):
        while True:
            stats = await _stats(pod)
            if stats["sessions"] == 0 and stats["sockets"] == 0 and not call._CLOSING:
                return dict(pod.built.pod.front.stats.closed)
            await asyncio.sleep(0.05)


@pytest.fixture
async def sdk() -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url="http://unused/v1", api_key="x", max_retries=0) as client:
        yield client


async def _call(sdk: openai.AsyncOpenAI, pod: pods.Running, caller: webrtc.Caller,
                session: dict | None = None) -> str:
    """The SDP exchange through the SDK; the session's id."""
    created = await sdk.with_options(base_url=pod.base_url).live.create(
        session=session or MODEL, transport={"type": "webrtc", "sdp": await caller.offer()})
    assert created.transport.type == "webrtc"
    await caller.accept(created.transport.sdp)
    return created.session.id


async def test_an_echo_is_heard_over_rtp_and_events_cross_the_data_channel(sdk: openai.AsyncOpenAI) -> None:
    """A 440 Hz tone goes out as Opus, through the sim's echo, and comes back as Opus; the
    channel's first event is `session.started` with the POST's id; mute is the machine's (the
    echo goes silent); `session.close` ends with `session.closed` and the channel and the peer
    connection closing; nothing is left on the pod."""
    async with pods.in_process() as pod:
        caller = webrtc.Caller(hz=440)
        session_id = await _call(sdk, pod, caller)
        started, before = await caller.until("session.started")
        assert before == [] and started["session"]["id"] == session_id
        assert started["session"]["audio"]["format"] == {"type": "audio/pcm", "rate": 24000}
        await asyncio.sleep(1.5)
        assert webrtc.power_at(caller.samples(1.0), 440) > 0.9
        caller.send({"type": "session.input_audio.mute", "event_id": "m"})
        muted, _ = await caller.until("session.input_audio.muted")
        assert muted["client_event_id"] == "m"
        await asyncio.sleep(2.0)  # the sim echoes 480 ms late, behind the jitter buffers
        assert np.abs(caller.samples(0.3)).max() < 300  # Opus of silence: a few LSB
        caller.send({"type": "session.close", "event_id": "c"})
        closed, _ = await caller.until("session.closed")
        assert closed["reason"] == "close_requested" and closed["client_event_id"] == "c"
        assert closed["session"]["id"] == session_id and closed["usage"]["seconds"] > 2
        async with asyncio.timeout(5):
            await caller.closed.wait()
        await caller.close()
        await _idle(pod)


async def test_a_caller_losing_packets_is_heard_without_holes(sdk: openai.AsyncOpenAI) -> None:
    """Every 7th RTP packet the caller sends is lost on the way (a lossy link): the pod conceals
    each with Opus's PLC (aiortc's sender puts no FEC in; the answer asks for it), so the tone
    the sim echoes back has no silent hole where a loss was (before: 20 ms of silence each, in
    the echo as in what the engine heard)."""
    async with pods.in_process() as pod:
        caller = webrtc.Caller(hz=440, lose_every=7)
        created = await sdk.with_options(base_url=pod.base_url).live.create(
            session=MODEL, transport={"type": "webrtc", "sdp": await caller.offer()})
        await caller.accept(created.transport.sdp)
        await caller.until("session.started")
        await asyncio.sleep(2.5)
        heard = caller.samples(1.5).astype(np.float64)  # 1.5 s of echo: about 10 losses in it
        assert webrtc.power_at(heard, 440) > 0.9
        loudness = np.sqrt((heard[:len(heard) // 240 * 240].reshape(-1, 240) ** 2).mean(axis=1))  # per 5 ms
        quiet = np.concatenate([[0], loudness < 0.3 * np.median(loudness), [0]]).astype(np.int8)
        holes = np.flatnonzero(np.diff(quiet)).reshape(-1, 2)  # each silent run's first and end window
        # a lost packet's hole (before: 15 ms every 140 ms); a box too loaded to keep up loses 80 ms
        # and more at once (the pod's tick), which is not what this test is about
        assert [(first, end) for first, end in holes if end - first <= 8] == [], holes
        assert "useinbandfec=1" in created.transport.sdp  # a browser would have sent FEC too
        await caller.close()
        await _idle(pod)


async def test_the_channel_refuses_a_start_and_audio_and_the_machine_answers_the_rest(
        sdk: openai.AsyncOpenAI) -> None:
    """`session.start` (the POST started the session) and `session.input_audio.append` (audio is
    RTP) are refused on the channel; anything else is the `Connection`'s to answer, as on a socket."""
    async with pods.in_process() as pod:
        caller = webrtc.Caller()
        await _call(sdk, pod, caller)
        await caller.until("session.started")
        caller.send({"type": "session.start", "event_id": "s", "session": MODEL})
        caller.send({"type": "session.input_audio.append", "event_id": "a", "audio": "AAAA"})
        caller.send({"type": "session.update", "event_id": "u", "session": {}})
        caller.send({"type": "session.commentary.append", "event_id": "k", "content": "hello"})
        caller.send({"type": "nope", "event_id": "n"})
        errors = []
        while len(errors) < 4:
            error, _ = await caller.until("error")
            errors.append((error["error"]["code"], error["error"]["param"], error["error"]["client_event_id"]))
        assert errors == [("unsupported_event", "type", "s"), ("unsupported_event", "type", "a"),
                          ("unsupported_event", "type", "u"), ("unknown_event", "type", "n")]
        caller.send({"type": "session.close"})
        await caller.until("session.closed")
        await caller.close()
        await _idle(pod)


async def test_data_channel_policy_filters_both_ways(sdk: openai.AsyncOpenAI) -> None:
    """`client.data_channel`: a client event left out of `allowed_client_events` is refused by
    name; server events left out of `allowed_server_events` (the transcript) never arrive."""
    policy = {"data_channel": {"allowed_client_events": ["session.close"],
                               "allowed_server_events": ["session.started", "session.closed", "error"]}}
    async with pods.in_process() as pod:
        caller = webrtc.Caller()
        await _call(sdk, pod, caller, {**MODEL, "client": policy})
        await caller.until("session.started")
        await asyncio.sleep(1.0)  # the sim's transcript words fall on the loud tone
        caller.send({"type": "session.input_audio.mute", "event_id": "m"})
        error, before = await caller.until("error")
        assert before == []
        assert (error["error"]["code"], error["error"]["client_event_id"]) == ("unsupported_event", "m")
        assert "allowed_client_events" in error["error"]["message"]
        caller.send({"type": "session.close"})
        _, before = await caller.until("session.closed")
        assert before == []
        await caller.close()
        await _idle(pod)


async def test_refusals_are_http_errors_the_sdk_raises(sdk: openai.AsyncOpenAI) -> None:
    """Bad input is a 400 naming the parameter; a full pod is 503 `server_busy`; none of them
    holds a slot or a call."""
    async with pods.in_process("--max-sessions", "1") as pod:
        client = sdk.with_options(base_url=pod.base_url)
        caller = webrtc.Caller()
        offer = await caller.offer()
        cases = [
            ({**MODEL, "idle_timeout_s": 30}, offer, "missing_required_parameter", "session.wake_policy"),
            ({**MODEL, "wake_policy": {"type": "speech", "vad_threshold": 2}}, offer, "invalid_value",
             "session.wake_policy.vad_threshold"),
            ({**MODEL, "audio": {"input": {}}}, offer, "unknown_parameter", "session.audio.input"),
            ({"model": "nope"}, offer, "model_not_found", "session.model"),
            (MODEL, "v=0\r\nnot sdp", "invalid_value", "transport.sdp"),
            (MODEL, "hello", "invalid_value", "transport.sdp"),
        ]
        for session, sdp, code, param in cases:
            with pytest.raises(openai.BadRequestError) as refused:
                await client.live.create(session=session, transport={"type": "webrtc", "sdp": sdp})
            assert (refused.value.body["code"], refused.value.body["param"]) == (code, param)
        taken = webrtc.Caller()
        await _call(sdk, pod, taken)
        await taken.until("session.started")
        with pytest.raises(openai.InternalServerError) as busy:
            await client.live.create(session=MODEL, transport={"type": "webrtc", "sdp": offer})
        assert busy.value.status_code == 503 and busy.value.body["code"] == "server_busy"
        taken.send({"type": "session.close"})
        await taken.until("session.closed")
        await taken.close()
        await caller.close()
        await _idle(pod)


async def test_an_offer_without_audio_or_a_channel_is_refused() -> None:
    """What the offer must have, named: audio with Opus, and a data channel."""
    async with pods.in_process() as pod, httpx.AsyncClient() as http:
        for caller, why in ((webrtc.Caller(audio=False), "no audio section"),
                            (webrtc.Caller(channel=False), "no data channel")):
            sdp = await caller.offer()
            answer = await http.post(f"{pod.base_url}/live/sessions", json={
                "session": MODEL, "transport": {"type": "webrtc", "sdp": sdp}})
            assert answer.status_code == 400 and why in answer.json()["error"]["message"]
            await caller.close()
        opus_less = (await webrtc.Caller().offer()).replace("opus/48000", "speex/48000")
        answer = await http.post(f"{pod.base_url}/live/sessions", json={
            "session": MODEL, "transport": {"type": "webrtc", "sdp": opus_less}})
        assert answer.status_code == 400 and "opus/48000" in answer.json()["error"]["message"]
        await _idle(pod)


async def test_a_caller_that_never_connects_is_let_go() -> None:
    """The answer is never applied (ICE never completes, the channel never opens): the session
    ends `webrtc_open_timeout_s` later and its slot is free again."""
    async with pods.in_process("--webrtc-open-timeout-s", "1") as pod:
        caller = webrtc.Caller()
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{pod.base_url}/live/sessions", json={
                "session": MODEL, "transport": {"type": "webrtc", "sdp": await caller.offer()}})
        assert answer.status_code == 200
        assert (await _stats(pod))["sessions"] == 1
        began = time.monotonic()
        assert await _idle(pod) == {"remote_hangup": 1}
        assert time.monotonic() - began < 5
        await caller.close()


async def test_a_caller_that_vanishes_ends_its_session() -> None:
    """The caller's peer connection closes without a word: the session ends as `remote_hangup`."""
    async with pods.in_process() as pod:
        async with openai.AsyncOpenAI(base_url=pod.base_url, api_key="x", max_retries=0) as sdk:
            caller = webrtc.Caller()
            await _call(sdk, pod, caller)
        await caller.until("session.started")
        await caller.close()
        assert await _idle(pod) == {"remote_hangup": 1}


async def test_a_sideband_attached_with_the_creates_key_steers_the_call(tmp_path) -> None:
    """The SDK's `live.sideband.connect`: `session.started` replayed first; commentary, mute and
    close from the sideband are the call's machine's (the caller hears the mute, both sides get
    the acks and the end); an error answering the sideband goes to it alone; its own end
    closes it. A second attach, another key, an unknown or an ended call are refused."""
    keys = tmp_path / "keys"
    keys.write_text("k1\nk2\n")
    async with pods.in_process("--api-key-file", str(keys)) as pod:
        async with openai.AsyncOpenAI(base_url=pod.base_url, api_key="k1", max_retries=0) as sdk:
            caller = webrtc.Caller(hz=440)
            session_id = await _call(sdk, pod, caller)
            await caller.until("session.started")
            attach = f"ws://{pod.address}/v1/live/sessions/{{}}/attach"
            for session, key, status in ((session_id, "k2", 404), ("sess_0000", "k1", 404),
                                         (session_id, "nope", 401)):
                with pytest.raises(websockets.InvalidStatus) as refused:
                    await websockets.connect(attach.format(session),
                                             additional_headers={"Authorization": f"Bearer {key}"})
                assert refused.value.response.status_code == status
            async with sdk.live.sideband.connect(session_id=session_id, max_retries=0) as side:
                first = await side.recv()
                assert (first.type, first.session.id) == ("session.started", session_id)
                with pytest.raises(websockets.InvalidStatus) as second:
                    await websockets.connect(attach.format(session_id),
                                             additional_headers={"Authorization": "Bearer k1"})
                assert second.value.response.status_code == 409
                await side.send({"type": "session.commentary.append", "content": "hello there",
                                 "event_id": "k"})
                await side.send({"type": "session.input_audio.append", "audio": "AAAA", "event_id": "a"})
                await side.send({"type": "session.input_audio.mute", "event_id": "m"})
                seen = await _until(side, "session.input_audio.muted")
                assert [(e.type, getattr(e, "client_event_id", None)) for e in seen
                        if e.type in ("session.commentary.appended", "error")] == [
                    ("session.commentary.appended", "k"), ("error", "a")]
                muted, before = await caller.until("session.input_audio.muted")
                assert muted["client_event_id"] == "m"
                assert "session.commentary.appended" in [e["type"] for e in before]
                assert "error" not in [e["type"] for e in before]  # the sideband's error is its own
                await asyncio.sleep(2.0)
                assert np.abs(caller.samples(0.3)).max() < 300
                await side.send({"type": "session.close", "event_id": "c"})
                closed = (await _until(side, "session.closed"))[-1]
                assert closed.reason == "close_requested" and closed.session.id == session_id
                await caller.until("session.closed")
            with pytest.raises(websockets.InvalidStatus) as ended:
                await websockets.connect(attach.format(session_id), additional_headers={"Authorization": "Bearer k1"})
            assert ended.value.response.status_code == 404
        await caller.close()
        assert await _idle(pod) == {"close_requested": 1}


async def _until(side: object, kind: str, timeout_s: float = 10.0) -> list:
    """The sideband's events up to and including the first of type `kind`."""
    seen = []
    async with asyncio.timeout(timeout_s):
        while not seen or seen[-1].type != kind:
            seen.append(await side.recv())  # type: ignore[attr-defined]
    return seen


async def _hears_its_tone_then_closes(caller: webrtc.Caller, answer: str, pod) -> None:
    """A relayed call through TURN: connected, its 440 Hz tone echoed, closed by the caller, the pod idle."""
    await caller.accept(answer)
    await caller.until("session.started", timeout_s=20)
    await asyncio.sleep(2.0)
    assert webrtc.power_at(caller.samples(1.0), 440) > 0.9
    caller.send({"type": "session.close"})
    await caller.until("session.closed")
    await caller.close()
    assert await _idle(pod) == {"close_requested": 1}


@pytest.mark.parametrize("transport", ["udp", "tcp"])
async def test_a_call_through_turn_with_relayed_candidates_only(tmp_path, transport: str) -> None:
    """What the chart's TURN server does in a cluster, on this machine: the pod answers with relayed
    candidates only (`--webrtc-relay-only`: its own addresses would be of no use to a caller
    outside), so every packet of the call goes through coturn, over UDP or TCP to it; the echo
    is heard and the events cross."""
    with turn.turnserver(tmp_path) as server:
        async with pods.in_process("--webrtc-ice-server", server.url(transport), "--webrtc-ice-username", turn.USER,
                                   "--webrtc-ice-password-file", str(server.password_file),
                                   "--webrtc-relay-only") as pod, \
                openai.AsyncOpenAI(base_url=pod.base_url, api_key="x", max_retries=0) as sdk:
            caller = webrtc.Caller(hz=440)
            created = await sdk.live.create(session=MODEL, transport={"type": "webrtc", "sdp": await caller.offer()})
            candidates = [line for line in created.transport.sdp.splitlines() if line.startswith("a=candidate:")]
            assert candidates and all(" typ relay " in line for line in candidates), candidates
            await _hears_its_tone_then_closes(caller, created.transport.sdp, pod)


async def test_a_caller_relays_over_tls_with_credentials_minted_from_the_turn_secret(tmp_path, monkeypatch) -> None:
    """The chart's fallback for networks that block UDP, on this machine: coturn checks time-limited
    logins (`use-auth-secret`, the secret shared with the pod) and serves TLS with a certificate
    the caller trusts. The caller gets its ICE servers from `GET /v1/live/ice_servers` (a `turns:`
    URL, a credential minted for it) and relays only over TLS; the pod relays over UDP with one
    minted for the call; the echo crosses coturn. coturn refuses an expired or forged login, and
    a caller that does not trust its certificate gets no candidate (the relay is TLS)."""
    with turn.turnserver(tmp_path, secret=True, tls=True) as server:
        assert server.ca_file is not None
        async with pods.in_process("--webrtc-ice-server", server.url("udp"), "--webrtc-relay-only",
                                   "--webrtc-ice-secret-file", str(server.password_file), "--webrtc-ice-ttl-s", "600",
                                   "--webrtc-caller-ice-server", server.tls_url()) as pod, \
                openai.AsyncOpenAI(base_url=pod.base_url, api_key="x", max_retries=0) as sdk, \
                httpx.AsyncClient() as http:
            handed = (await http.get(f"{pod.base_url}/live/ice_servers")).json()
            [given] = handed["ice_servers"]
            assert given["urls"] == [server.tls_url()]
            expiry, _ = given["username"].split(":")
            assert int(expiry) == handed["expires_at"] and 590 < handed["expires_at"] - time.time() <= 600
            assert given["credential"] == ice.mint(turn.SECRET, int(expiry), given["username"].split(":")[1]).password

            def relayed(server_: dict) -> webrtc.Caller:
                return webrtc.Caller(hz=440, ice=RTCConfiguration(
                    [RTCIceServer(server_["urls"], server_["username"], server_["credential"])],
                    RTCIceTransportPolicy.RELAY))

            untrusting = relayed(given)
            assert "a=candidate:" not in await untrusting.offer()
            await untrusting.close()
            monkeypatch.setenv("SSL_CERT_FILE", str(server.ca_file))  # what asyncio's TLS client trusts
            for refused in (ice.mint(turn.SECRET, int(time.time()) - 5, "late"), ice.mint("forged", 2**31, "x")):
                stranger = relayed({**given, "username": refused.username, "credential": refused.password})
                assert "a=candidate:" not in await stranger.offer()  # coturn allocated nothing
                await stranger.close()
            caller = relayed(given)
            offer = await caller.offer()
            candidates = [line for line in offer.splitlines() if line.startswith("a=candidate:")]
            assert candidates and all(" typ relay " in line for line in candidates), candidates
            created = await sdk.live.create(session=MODEL, transport={"type": "webrtc", "sdp": offer})
            await _hears_its_tone_then_closes(caller, created.transport.sdp, pod)


async def test_ice_servers_need_the_key_and_hand_no_static_password() -> None:
    """`GET /v1/live/ice_servers` answers only with the API key; STUN URLs go bare; with no
    secret there is nothing to mint, so nothing expires."""
    async with pods.in_process("--api-key", "k", "--webrtc-caller-ice-server", "stun:turn.example:3478") as pod, \
            httpx.AsyncClient() as http:
        url = f"{pod.base_url}/live/ice_servers"
        assert (await http.get(url)).status_code == 401
        answer = await http.get(url, headers={"Authorization": "Bearer k"})
        assert answer.json() == {"ice_servers": [{"urls": ["stun:turn.example:3478"]}], "expires_at": None}
        assert answer.headers["cache-control"] == "no-store"


def test_ice_flags_are_checked_before_anything_starts(tmp_path) -> None:
    from liveplex import serve
    from liveplex.gptlive.server import settings

    def refused(*flags: str) -> str:
        args = serve.build_parser().parse_args(["--engine", "sim", *flags])
        with pytest.raises(ValueError) as error:
            settings.settings_from_args(args, {})
        return str(error.value)

    assert "turn:" in refused("--webrtc-ice-server", "http://x")
    assert "--webrtc-relay-only" in refused("--webrtc-relay-only", "--webrtc-ice-server", "stun:x:3478")
    assert "cannot read" in refused("--webrtc-ice-password-file", str(tmp_path / "none"))
    secret = tmp_path / "secret"
    secret.write_text("s\n")
    assert "--webrtc-ice-secret-file" in refused("--webrtc-caller-ice-server", "turns:x:443?transport=tcp")
    assert "without" in refused("--webrtc-ice-secret-file", str(secret), "--webrtc-ice-username", "u")
    assert "--webrtc-caller-ice-server" in refused("--webrtc-caller-ice-server", "http://x")
    assert "--webrtc-ice-ttl-s" in refused("--webrtc-ice-ttl-s", "0")


async def test_a_caller_whose_audio_stops_is_let_go() -> None:
    """The caller's peer connection stays up (ICE consent is answered) but no audio packet comes:
    the call ends `--webrtc-silence-timeout-s` later, as `remote_hangup`."""
    async with pods.in_process("--webrtc-silence-timeout-s", "1") as pod, \
            openai.AsyncOpenAI(base_url=pod.base_url, api_key="x", max_retries=0) as sdk:
        caller = webrtc.Caller()
        await _call(sdk, pod, caller)
        await caller.until("session.started")
        await asyncio.sleep(0.5)
        caller.pc.getSenders()[0].replaceTrack(None)  # the microphone goes, the connection stays
        began = time.monotonic()
        assert await _idle(pod) == {"remote_hangup": 1}
        assert time.monotonic() - began < 5
        await caller.close()
