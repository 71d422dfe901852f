"""A hostile client against the platform (two sim pods, a gateway with API keys, real Redis, all on
loopback): what one client can make the gateway or the pods do to everyone else. Each test is the
regression test of a finding of the probe in issue 20."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import websockets

from tests.support import hostile, platform
from tests.support.clients import START, until
from tests.support.redis import running_redis

pytestmark = pytest.mark.timeout(180)

KEY = "key-a"
AUTH = {"Authorization": f"Bearer {KEY}"}


@contextlib.contextmanager
def _keyed(redis_url: str, tmp: Path) -> Iterator[platform.Platform]:
    """Clients need `KEY`; pods take only the installation's pod token, which the gateway has."""
    keys, token = tmp / "keys", tmp / "pod-token"
    keys.write_text(f"{KEY}\n")
    token.write_text("pod-token-0123\n")
    with platform.platform(redis_url, tmp, gateway_flags=("--api-key-file", str(keys), "--max-connections", "100",
                                                          "--pod-key-file", str(token)),
                           pod_flags=("--lateness-budget-ms", "1000", "--api-key-file", str(token))) as p:
        yield p


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[platform.Platform]:
    """One platform for the tests that leave it as they found it (every session closed, no pod
    drained or stopped), on a Redis of its own: the shared one is emptied before every test."""
    with running_redis() as redis_server, _keyed(redis_server.url, tmp_path_factory.mktemp("hostile")) as p:
        yield p


@pytest.fixture
def keyed(redis_url, tmp_path) -> Iterator[platform.Platform]:
    """A platform of the test's own, for a test that drains, stops or wedges part of it."""
    with _keyed(redis_url, tmp_path) as p:
        yield p


def _sessions_ended(p: platform.Platform) -> None:
    platform.eventually(lambda: p.pod_sessions() == [0, 0], "the shared platform's sessions ended")


async def started(url: str, headers: dict[str, str] = AUTH):
    ws = await websockets.connect(url, additional_headers=headers, max_queue=None, max_size=None)
    await ws.send(orjson.dumps(START).decode())
    await until(ws, "session.started")
    return ws


def test_a_huge_event_id_is_refused_by_name_and_takes_no_pod_out_of_rotation(shared) -> None:
    """A 2 MB `event_id` was echoed twice by the pod (4 MiB), over the gateway's upstream limit: the
    gateway called the pod dead and tripped its breaker, so two of them made every start busy."""
    keyed = shared
    _sessions_ended(keyed)

    async def scenario() -> None:
        ws = await started(keyed.gateway.ws_url)
        for _ in range(2):
            await ws.send(orjson.dumps({"type": "no.such.event", "event_id": "x" * 2_000_000}).decode())
            error, _ = await until(ws, "error")
            assert error["error"]["code"] == "string_above_max_length"
            assert error["error"]["param"] == "event_id" and "client_event_id" not in error
        await until(ws, "session.output_audio.delta")  # the session goes on
        others = [await started(keyed.gateway.ws_url) for _ in range(3)]  # both pods still placed on
        platform.eventually(lambda: sorted(keyed.pod_sessions()) == [2, 2], "the four sessions spread")
        for other in (ws, *others):
            await other.close()
    asyncio.run(scenario())
    _sessions_ended(keyed)


def test_a_long_unknown_type_is_echoed_capped() -> None:
    from liveplex.gptlive import errors, events

    invalid = events.parse(orjson.dumps({"type": "t" * 1_000_000, "event_id": "e"}).decode())
    assert isinstance(invalid, events.Invalid)
    body = events.dump(events.Error(invalid.error, invalid.event_id))
    assert len(body) < 1000 and "1000000 characters" in body
    assert len(errors.render_path(("session", "k" * 10_000))) < 200


def _upgrade(address: str, authorization: bytes) -> bytes:
    return (b"GET /v1/live/sessions HTTP/1.1\r\nHost: " + address.encode() + b"\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\nAuthorization: " + authorization + b"\r\n\r\n")


async def _answer(address: str, request: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    try:
        async with asyncio.timeout(5):
            return await reader.read()
    finally:
        writer.close()


def test_malformed_credentials_are_401s_with_a_body_and_leak_no_connection(shared) -> None:
    """A non-ASCII bearer token raised inside the upgrade and left the connection counted: ~1,000
    of them locked the gateway out for good. 1,500 malformed upgrades (more than the 100
    connections allowed), then a valid session and /health."""
    keyed = shared
    bad = [b"Bearer \xc3\xa9t\xc3\xa9", b"Bearer \xff\xfe", b"Basic a b c", b"Bearer", b"\x80"]

    async def scenario() -> None:
        for i in range(1500):
            answer = await _answer(keyed.gateway.address, _upgrade(keyed.gateway.address, bad[i % len(bad)]))
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
            assert b'"invalid_api_key"' in answer
        ws = await started(keyed.gateway.ws_url)
        await ws.close()
    asyncio.run(scenario())
    with urllib.request.urlopen(keyed.gateway.root + "/health", timeout=5) as response:
        assert response.status == 200


def test_unauthenticated_partial_requests_cannot_starve_a_valid_key(shared) -> None:
    """105 connections that never finish their request (at --max-connections 100) locked a valid
    key out for the 10 s header timeout: now the oldest unfinished request makes room."""
    keyed = shared

    async def scenario() -> None:
        loose = [await hostile.tcp(keyed.gateway.address) for _ in range(105)]
        loop = asyncio.get_running_loop()
        for sock in loose:
            await loop.sock_sendall(sock, b"GET /v1/live/sessions HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        ws = await started(keyed.gateway.ws_url)
        assert time.monotonic() - t0 < 2
        await ws.close()
        for sock in loose:
            sock.close()
    asyncio.run(scenario())


def _status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_admin_routes_are_not_on_the_client_port(keyed) -> None:
    """`POST /drain` without a key stopped a gateway; stats, config and metrics answered anyone."""
    root, admin = keyed.gateway.root, keyed.gateway.admin_root
    assert _status(root + "/drain", "POST") == 404
    assert _status(root + "/metrics") == 404
    assert _status(root + "/live/stats") == 401
    assert _status(root + "/live/stats", headers=AUTH) == 200
    assert _status(root + "/live/config") == 200  # the page's description, deliberately public
    assert _status(admin + "/metrics") == 200 and _status(admin + "/live/stats") == 200
    assert _status(admin + "/v1/models", headers=AUTH) == 404  # the admin port serves no client
    assert _status(root + "/ready") == 200
    for pod, _ in keyed.pods:
        assert _status(pod.root + "/drain", "POST") == 404
        assert _status(pod.admin_root + "/metrics") == 200
    assert _status(admin + "/drain?deadline_s=x", "POST") == 400
    assert _status(admin + "/drain?deadline_s=0", "POST") == 200
    assert _status(root + "/ready") == 503

    async def refused() -> dict:
        ws = await websockets.connect(keyed.gateway.ws_url, additional_headers=AUTH)
        await ws.send(orjson.dumps(START).decode())
        error, _ = await until(ws, "error")
        await ws.close()
        return error["error"]
    error = asyncio.run(refused())  # it said "No engine is ready"
    assert error["code"] == "server_busy" and "gateway is shutting down" in error["message"]


def test_a_relayed_session_ended_by_its_pods_drain_deadline_closes_as_the_pod_did(keyed) -> None:
    """The pod closes 1001 (going away) at its drain deadline; the gateway closed 1000."""
    async def scenario() -> None:
        ws = await started(keyed.gateway.ws_url)
        platform.eventually(lambda: sorted(keyed.pod_sessions()) == [0, 1], "the session on one pod")
        pod = keyed.pods[keyed.pod_sessions().index(1)][0]
        assert await asyncio.to_thread(_status, pod.admin_root + "/drain?deadline_s=0", "POST") == 200
        closed, seen = await until(ws, "session.closed")
        assert "server_shutdown" in [e["error"]["code"] for e in seen if e["type"] == "error"]
        await ws.wait_closed()
        assert ws.close_code == 1001
    asyncio.run(scenario())


def test_pods_take_sessions_only_from_gateways(shared) -> None:
    keyed = shared

    async def scenario() -> None:
        pod = keyed.pods[0][0]
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(pod.ws_url, additional_headers=AUTH)
        assert refused.value.response.status_code == 401
        ws = await started(keyed.gateway.ws_url)  # the gateway has the pods' token
        await ws.close()
    asyncio.run(scenario())


def test_a_hung_pods_session_resumes_on_the_other_pod_and_placement_skips_it(keyed) -> None:
    """SIGSTOP (a wedged driver): the pod neither answers nor closes; its sessions were silent for
    30 s and more. Now the upstream's read deadline declares it lost within 1 s, the session
    resumes on the other pod from its checkpoints (no event at all), and placement skips the pod."""
    async def scenario() -> None:
        ws = await started(keyed.gateway.ws_url)
        platform.eventually(lambda: sorted(keyed.pod_sessions()) == [0, 1], "the session on one pod")
        victim_index = keyed.pod_sessions().index(1)
        victim = keyed.pods[victim_index][1]
        victim.send_signal(signal.SIGSTOP)
        try:
            survivor = keyed.pods[1 - victim_index][0]
            await asyncio.to_thread(platform.eventually, lambda: platform.get_json(
                survivor.admin_root + "/live/stats")["sessions"] == 1, "the session resumed on the survivor")
            seen = []
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):  # everything the client got, the resumed audio included
                    while True:
                        seen.append(orjson.loads(await ws.recv()))
            kinds = {e["type"] for e in seen}
            assert "session.output_audio.delta" in kinds and not kinds & {"error", "session.closed"}, kinds
            again = [await started(keyed.gateway.ws_url) for _ in range(2)]  # both on the survivor
            assert platform.get_json(survivor.admin_root + "/live/stats")["sessions"] == 3
            for other in (ws, *again):
                await other.close()
        finally:
            victim.send_signal(signal.SIGCONT)
    asyncio.run(scenario())
