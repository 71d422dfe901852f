"""The gateway end to end: real redis-server, real sim pods and gateway processes, real sockets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import orjson
import pytest
import websockets

from tests.conformance import servers
from tests.support import clients, platform, pods
from tests.support.clients import LOUD, START, started, until

pytestmark = pytest.mark.timeout(180)



def test_the_sdk_holds_sessions_through_the_gateway_spread_over_the_pods(redis_url, tmp_path) -> None:
    # placement ranks degraded pods last, and one tick 20 ms late on a loaded 2-core CI box marks a
    # pod degraded for a heartbeat: a budget no tick reaches keeps this test about spreading
    with platform.platform(redis_url, tmp_path, pod_flags=("--lateness-budget-ms", "1000")) as p:
        async def scenario() -> None:
            sockets = [await started(p.gateway.ws_url) for _ in range(4)]
            platform.eventually(lambda: p.pod_sessions() == [2, 2], "two sessions on each pod")
            deltas, words, reason = await clients.sdk_call(p.gateway.base_url)
            assert reason == "close_requested" and words.startswith("I hear")
            assert {len(d) for d in deltas} == {3840}
            with urllib.request.urlopen(p.gateway.admin_root + "/metrics", timeout=5) as response:
                metrics = response.read().decode()
            for name in ("liveplex_gateway_session_start_seconds_count", "liveplex_gateway_first_audio_seconds_count"):
                assert f"{name} 5.0" in metrics, name  # the four raw sessions and the SDK's, each once
            for ws, _ in sockets:
                await ws.close()
        asyncio.run(scenario())
        platform.eventually(lambda: p.stats()["sessions"] == 0, "the pods to report no session")


def test_the_conformance_checklist_passes_through_the_gateway(redis_url, tmp_path) -> None:
    """Two pods of 4 slots: the capacity checks see the pool's 8 and find server_busy at the 9th."""
    with platform.platform(redis_url, tmp_path, pod_flags=("--max-sessions", "4")) as p:
        code, lines = servers.check(p.gateway.base_url)
    report = servers.report(lines)
    assert code == 0, "\n".join(lines)
    assert {n for n, s in report.items() if s == "FAIL"} == set()
    assert report[18] == report[19] == report[40] == "PASS"


def test_a_pod_killed_mid_session_with_none_to_resume_on_is_server_error_then_connection_lost_within_2_s(
        redis_url, tmp_path) -> None:
    """With another pod the call resumes there (test_resume.py); with none it ends, and says so."""
    with platform.platform(redis_url, tmp_path, n_pods=1) as p:
        async def scenario() -> None:
            ws, _ = await started(p.gateway.ws_url)
            p.pods[0][1].send_signal(signal.SIGKILL)
            t0 = time.monotonic()
            error, _ = await until(ws, "error", timeout=2)
            closed, _ = await until(ws, "session.closed", timeout=2)
            assert time.monotonic() - t0 < 2
            assert (error["error"]["code"], closed["reason"]) == ("server_error", "connection_lost")
            await ws.wait_closed()
            assert ws.close_code == 1011
        asyncio.run(scenario())


def test_redis_down_keeps_live_sessions_fails_open_then_busy_and_recovers(redis_server, redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path) as p:
        async def scenario() -> None:
            ws, _ = await started(p.gateway.ws_url)
            redis_server.stop()
            for _ in range(10):  # the live session does not notice
                await ws.send(orjson.dumps({"type": "session.input_audio.append", "audio": LOUD}).decode())
                await until(ws, "session.output_audio.delta")
            fresh, _ = await started(p.gateway.ws_url)  # fail-open from a snapshot < 5 s old
            await fresh.close()
            await asyncio.sleep(5.5)  # the snapshot is now too old to trust
            late = await websockets.connect(p.gateway.ws_url)
            await late.send(orjson.dumps(START).decode())
            error, _ = await until(late, "error")
            assert error["error"]["code"] == "server_busy"
            assert "placement store is unreachable" in error["error"]["message"]  # not "All 0 live sessions"
            redis_server.start()
            t0 = time.monotonic()
            while True:  # placement is back within 5 s of Redis returning
                await late.send(orjson.dumps(START).decode())
                event = orjson.loads(await asyncio.wait_for(late.recv(), 5))
                if event["type"] == "session.started":
                    break
                assert time.monotonic() - t0 < 5, event
                await asyncio.sleep(0.2)
            await late.close()
            await ws.send(orjson.dumps({"type": "session.close"}).decode())
            closed, _ = await until(ws, "session.closed")
            assert closed["reason"] == "close_requested"
        asyncio.run(scenario())


def test_a_draining_pod_takes_no_new_session_and_its_running_one_moves(redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path) as p:
        async def scenario() -> None:
            ws, _ = await started(p.gateway.ws_url)
            platform.eventually(lambda: sorted(p.pod_sessions()) == [0, 1], "the session on one pod")
            busy = p.pod_sessions().index(1)
            drained: list[dict] = []
            drain = threading.Thread(target=lambda: drained.append(platform.get_json(
                p.pods[busy][0].admin_root + "/drain?deadline_s=60")))
            drain.start()
            platform.eventually(lambda: _status(p.pods[busy][0].root + "/ready") == 503, "/ready to say 503")
            others = [await started(p.gateway.ws_url) for _ in range(3)]
            def moved() -> bool:  # the old pod lets it go (the export) before the new one runs it (the dial)
                sessions = p.pod_sessions()
                return sessions[busy] == 0 and sessions[1 - busy] == 4

            platform.eventually(moved, "the running session moved (test_moves.py)")
            for _ in range(5):
                await ws.send(orjson.dumps({"type": "session.input_audio.append", "audio": LOUD}).decode())
            await ws.send(orjson.dumps({"type": "session.close"}).decode())
            closed, seen = await until(ws, "session.closed")
            assert closed["reason"] == "close_requested"
            await asyncio.to_thread(drain.join, 10)
            assert drained == [{"drained": True, "ended_at_deadline": 0}]
            for other, _ in others:
                await other.close()
        asyncio.run(scenario())


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_sigterm_drains_a_pod_before_it_exits(redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--drain-deadline-s", "1")) as p:
        async def scenario() -> None:
            ws, _ = await started(p.gateway.ws_url)
            pod = p.pods[0][1]
            os.kill(pod.pid, signal.SIGTERM)
            error, _ = await until(ws, "error", timeout=5)  # at the 1 s deadline
            closed, _ = await until(ws, "session.closed")
            assert (error["error"]["code"], closed["reason"]) == ("server_shutdown", "connection_lost")
            await asyncio.to_thread(pod.wait, 10)
        asyncio.run(scenario())
    log = (tmp_path / "pod-0.log").read_text()  # complete once the platform has stopped
    assert '"msg": "draining"' in log and '"msg": "stopped"' in log and "SIGTERM" in log


def test_two_gateways_racing_never_overbook_a_pod(redis_url, tmp_path) -> None:
    """Two gateway processes place 60 concurrent starts onto two pods of 2 slots: exactly 4 start,
    every other caller is told server_busy, and no pod ever runs more than its cap."""
    with platform.platform(redis_url, tmp_path, pod_flags=("--max-sessions", "2")) as p, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, log=tmp_path / "gw2.log",
                                command="gateway") as (second, _):
        platform.eventually(lambda: platform.get_json(second.root + "/live/stats")["pods"] == 2,
                            "the second gateway to see both pods")

        async def caller(url: str) -> tuple[str, websockets.ClientConnection]:
            ws = await websockets.connect(url)
            await ws.send(orjson.dumps(START).decode())
            async with asyncio.timeout(15):
                while True:
                    event = orjson.loads(await ws.recv())
                    if event["type"] in ("session.started", "error"):
                        kind = event["type"] if event["type"] != "error" else event["error"]["code"]
                        return kind, ws

        async def scenario() -> None:
            answers = await asyncio.gather(*(caller(url) for url in [p.gateway.ws_url, second.ws_url] * 30))
            kinds = [kind for kind, _ in answers]
            assert kinds.count("session.started") == 4 and kinds.count("server_busy") == 56, kinds
            assert sorted(p.pod_sessions()) == [2, 2]
            for _, ws in answers:
                await ws.close()
        asyncio.run(scenario())


def test_bench_place_reports_placements_through_the_gateway(redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path, pod_flags=("--max-sessions", "32")) as p:
        done = subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "place", "--base-url",
                               p.gateway.base_url, "--concurrency", "4", "--seconds", "2", "--redis-url",
                               redis_url, "--pods", "4", "--gateway-pid", str(p.gateway_process.pid),
                               "--out", str(tmp_path / "place.json")],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "place.json").read_text())
    assert report["outcomes"]["placed"] > 0 and report["outcomes"]["failed"] == 0, report
    assert report["start_ms"]["count"] == report["outcomes"]["placed"]
    assert report["decision_ms"]["count"] > 0
    cpu = report["gateway_cpu"]  # the gateway's own CPU, read from its pid
    assert cpu["seconds"] > 0 and cpu["ms_per_placement"] == pytest.approx(
        cpu["seconds"] * 1e3 / report["outcomes"]["placed"], rel=0.01)


def test_api_keys_from_a_file_with_a_per_key_session_limit(redis_url, tmp_path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# one key per line\nkey-a\nkey-b\n")
    with platform.platform(redis_url, tmp_path, gateway_flags=("--api-key-file", str(keys),
                                                               "--max-sessions-per-key", "1")) as p:
        assert _status(p.gateway.root + "/") == 200  # the demo page, served by the gateway too

        async def scenario() -> None:
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(p.gateway.ws_url)
            assert refused.value.response.status_code == 401
            a = {"Authorization": "Bearer key-a"}
            first = await websockets.connect(p.gateway.ws_url, additional_headers=a)
            await first.send(orjson.dumps(START).decode())
            await until(first, "session.started")
            again = await websockets.connect(p.gateway.ws_url, additional_headers=a)
            await again.send(orjson.dumps(START).decode())
            error, _ = await until(again, "error")
            assert error["error"]["code"] == "server_busy" and "limit" in error["error"]["message"]
            other = await websockets.connect(p.gateway.ws_url, additional_headers={"Authorization": "Bearer key-b"})
            await other.send(orjson.dumps(START).decode())
            await until(other, "session.started")
            for ws in (first, again, other):
                await ws.close()
        asyncio.run(scenario())
