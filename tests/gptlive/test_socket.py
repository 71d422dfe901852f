"""The socket paths over real loopback WebSockets against the sim or a hand-played engine."""

from __future__ import annotations

import asyncio
import base64

import httpx
import numpy as np
import orjson
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from liveplex.pod.settings import PodSettings
from tests.gptlive.servers import Stubborn
from tests.support import pods
from tests.support.clients import LOUD, START, until
from tests.support.exposition import misnamed

pytestmark = pytest.mark.timeout(60)


async def send(ws, body: dict) -> None:
    await ws.send(orjson.dumps(body).decode())


async def sessions_drop_to(address: str, n: int) -> None:
    """Poll `/live/stats` until the engine runs `n` sessions (the engine thread's own pace)."""
    async with httpx.AsyncClient(base_url=f"http://{address}") as http:
        for _ in range(200):
            if (await http.get("/live/stats")).json()["sessions"] == n:
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"sessions never dropped to {n}")


async def started(address: str, **connect: object):
    ws = await websockets.connect(f"ws://{address}/v1/live/sessions", **connect)
    await send(ws, START)
    await until(ws, "session.started")
    return ws


async def test_close_requested_then_1000() -> None:
    async with pods.in_process() as running:
        address = running.address
        ws = await started(address)
        await send(ws, {"type": "session.input_audio.append", "audio": LOUD})
        await send(ws, {"type": "session.close", "event_id": "c1"})
        closed, seen = await until(ws, "session.closed")
        assert (closed["reason"], closed["client_event_id"]) == ("close_requested", "c1")
        deltas = sum(e["type"] == "session.output_audio.delta" for e in seen)
        assert deltas == round(closed["usage"]["seconds"] / 0.08)
        await ws.wait_closed()
        assert ws.close_code == 1000


async def test_busy_then_retry_on_the_same_socket() -> None:
    async with pods.in_process("--max-sessions", "1") as running:
        address = running.address
        first = await started(address)
        second = await websockets.connect(f"ws://{address}/v1/live/sessions")
        await send(second, {**START, "event_id": "b1"})
        error, seen = await until(second, "error")
        assert (error["error"]["code"], error["client_event_id"], len(seen)) == ("server_busy", "b1", 1)
        await send(second, {"type": "session.input_audio.mute"})
        assert (await until(second, "error"))[0]["error"]["code"] == "session_not_started"
        await first.close()  # the client vanishes: its slot frees at the next tick
        await sessions_drop_to(address, 0)
        await send(second, START)
        assert (await until(second, "session.started"))[1][0]["client_event_id"] == "s1"
        await second.close()


async def test_engine_fault_is_server_error_connection_lost_1011() -> None:
    async with pods.in_process("--fail-after-ticks", "5") as running:
        address = running.address
        ws = await started(address)
        error, _ = await until(ws, "error")
        closed, _ = await until(ws, "session.closed")
        assert (error["error"]["code"], closed["reason"]) == ("server_error", "connection_lost")
        await ws.wait_closed()
        assert ws.close_code == 1011


async def test_engine_ending_the_session_is_expired_1000() -> None:
    async with pods.in_process("--max-seconds", "0.4") as running:
        address = running.address
        ws = await started(address)
        closed, seen = await until(ws, "session.closed")
        assert closed["reason"] == "expired" and closed["usage"]["seconds"] == 0.4
        assert sum(e["type"] == "session.output_audio.delta" for e in seen) == 5
        await ws.wait_closed()
        assert ws.close_code == 1000


async def test_close_grace_when_the_engine_never_answers() -> None:
    async with pods.in_process("--close-grace-ms", "300", engine=lambda info: Stubborn()) as running:
        address = running.address
        ws = await started(address)
        await send(ws, {"type": "session.close", "event_id": "c1"})
        closed, _ = await until(ws, "session.closed")
        assert (closed["reason"], closed["client_event_id"]) == ("close_requested", "c1")
        await ws.wait_closed()
        assert ws.close_code == 1000


async def test_a_handler_exception_still_hangs_up() -> None:
    engine = Stubborn(pcm=bytes(100))  # not a frame: the 16 kHz transcoder refuses it
    async with pods.in_process(engine=lambda info: engine) as running:
        address = running.address
        ws = await websockets.connect(f"ws://{address}/v1/live/sessions")
        await send(ws, {**START, "session": {"model": "gpt-live-1",
                                             "audio": {"format": {"type": "audio/pcm", "rate": 16000}}}})
        await ws.wait_closed()
        assert ws.close_code == 1011
        for _ in range(100):
            if engine.hung_up == [True]:
                break
            await asyncio.sleep(0.02)  # the engine thread reports at its next tick
        assert engine.hung_up == [True]


async def test_close_before_start_and_a_later_session_works() -> None:
    async with pods.in_process("--max-sessions", "1") as running:
        address = running.address
        ws = await websockets.connect(f"ws://{address}/v1/live/sessions")
        await ws.close()
        ws = await websockets.connect(f"ws://{address}/v1/live/sessions")
        await send(ws, START)
        await send(ws, START)  # pipelined: read only after the first start settled
        assert (await until(ws, "error"))[0]["error"]["code"] == "session_already_started"
        await ws.close()


async def test_mute_is_acked_and_the_echo_goes_silent() -> None:
    async with pods.in_process() as running:
        address = running.address
        ws = await started(address)
        await send(ws, {"type": "session.input_audio.mute", "event_id": "m1"})
        ack, _ = await until(ws, "session.input_audio.muted")
        assert ack["client_event_id"] == "m1"
        for _ in range(15):
            await send(ws, {"type": "session.input_audio.append", "audio": LOUD})
        seen = [(await until(ws, "session.output_audio.delta"))[0] for _ in range(15)]
        assert all(base64.b64decode(e["delta"]) == bytes(3840) for e in seen)
        await ws.close()


async def test_bad_input_on_one_socket_never_disturbs_another() -> None:
    async with pods.in_process() as running:
        address = running.address
        # `bad` never reads its errors: an unbounded queue lets its close handshake through
        good, bad = await started(address), await started(address, max_queue=None)
        ramp = [base64.b64encode(np.full(1920, 100 * (i + 1), "<i2").tobytes()).decode()
                for i in range(40)]

        async def vandal() -> None:
            for junk in ["x", "[]", '{"type":"foo"}', '{"type":"session.input_audio.append",'
                         '"audio":"!!"}', '{"type":"session.update"}'] * 20:
                await bad.send(junk)
            await bad.send(b"\x00\x01")

        async def speak() -> None:
            for chunk in ramp:
                await send(good, {"type": "session.input_audio.append", "audio": chunk})
                await asyncio.sleep(0.08)
            await send(good, {"type": "session.close"})

        tasks = [asyncio.create_task(vandal()), asyncio.create_task(speak())]
        closed, seen = await until(good, "session.closed")
        await asyncio.gather(*tasks)
        assert not [e for e in seen if e["type"] == "error"]
        heard = [int(np.frombuffer(base64.b64decode(e["delta"]), "<i2")[0])
                 for e in seen if e["type"] == "session.output_audio.delta"]
        assert len(heard) == round(closed["usage"]["seconds"] / 0.08)
        levels = [h for h in heard if h]
        assert levels == sorted(levels) and len(set(levels)) == len(levels)  # nothing reordered
        async with httpx.AsyncClient(base_url=f"http://{address}") as http:
            stats = (await http.get("/live/stats")).json()
        # nothing lost from the first chunk to the last one echoed, except what the pod counted:
        # the audio of a skipped tick, or samples past the jitter cap
        accounted = stats["late_ticks"] + stats["dropped_samples"] // 1920
        assert len(levels) >= 20 and levels[-1] // 100 - len(levels) <= accounted, levels
        await bad.close()


async def test_http_routes_auth_and_refused_paths() -> None:
    async with pods.in_process("--api-key", "t0ken", "--no-metrics") as running:
        address = running.address
        async with httpx.AsyncClient(base_url=f"http://{address}") as http:
            assert (await http.get("/v1/models")).status_code == 401
            models = await http.get("/v1/models", headers={"Authorization": "Bearer t0ken"})
            assert models.json()["data"][0]["id"] == "liveplex-sim"
            gone = await http.get("/v1/live/sessions/x/attach")
            assert (gone.status_code, gone.json()["error"]["code"]) == (404, "unsupported_endpoint")
            assert (await http.get("/metrics")).status_code == 404  # the admin listener's
            nowhere, wrong = await http.get("/no/such/path"), await http.delete("/health")
            assert (nowhere.status_code, nowhere.json()["error"]["code"]) == (404, "not_found")
            assert (wrong.status_code, wrong.json()["error"]["code"]) == (405, "method_not_allowed")
            assert "GET" in wrong.headers["allow"]
            assert (await http.get(running.admin_root + "/metrics")).status_code == 503
            config = (await http.get("/live/config")).json()
            assert (config["voice"], config["max_seconds"]) == ("marin", 240.0)
            defaults = PodSettings()
            assert config["pacing"] == {"lead_ms": defaults.pace_lead_ms, "spread_ms": defaults.pace_spread_ms}
            assert (await http.get("/health")).text == "ok"
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(f"ws://{address}/v1/live/sessions")
        assert refused.value.response.status_code == 401
        with pytest.raises(websockets.InvalidStatus) as missing:
            await websockets.connect(f"ws://{address}/v1/live/sessions/x/fork",
                                     additional_headers={"Authorization": "Bearer t0ken"})
        assert missing.value.response.status_code == 404


async def test_metrics_expose_engine_and_front_end_counters() -> None:
    async with pods.in_process() as running:
        address = running.address
        ws = await started(address)
        await ws.send("nope")
        await until(ws, "error")
        async with httpx.AsyncClient(base_url=f"http://{address}") as http:
            text = (await http.get(running.admin_root + "/metrics")).text
        for name in ("liveplex_engine_ticks_total", "liveplex_engine_tick_duration_seconds_bucket",
                     "liveplex_engine_tick_lateness_seconds_bucket", "liveplex_engine_batch_size_bucket",
                     "liveplex_engine_sessions_active", 'liveplex_engine_errors_total{code="invalid_json"} 1.0',
                     "liveplex_engine_underruns_total", "liveplex_engine_dropped_samples_total"):
            assert name in text
        assert misnamed(text) == []
        await ws.close()


async def test_the_start_and_the_first_audio_are_timed_once_per_session() -> None:
    """Time to session.started and to the first audio delta, the speech analogue of time to first
    token, as the pod's histograms."""
    async with pods.in_process() as running:
        ws = await started(running.address)
        await until(ws, "session.output_audio.delta")
        async with httpx.AsyncClient() as http:
            text = (await http.get(running.admin_root + "/metrics")).text
        await ws.close()
    counts = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line.startswith(("liveplex_engine_session_start_seconds_", "liveplex_engine_first_audio_seconds_"))}
    start, first_audio = "liveplex_engine_session_start_seconds", "liveplex_engine_first_audio_seconds"
    assert counts[f"{start}_count"] == counts[f"{first_audio}_count"] == 1
    assert 0 < counts[f"{start}_sum"] < counts[f"{first_audio}_sum"] < 5


async def ticked(http: httpx.AsyncClient, ticks: int) -> None:
    """Poll `/live/stats` until the engine has run `ticks` ticks."""
    async with asyncio.timeout(10):
        while (await http.get("/live/stats")).json()["ticks"] < ticks:
            await asyncio.sleep(0.05)


async def test_late_ticks_show_their_lateness_in_stats_and_metrics() -> None:
    # Every tick computes 120 ms, 1.5 periods, so each tick starts half a period (40 ms) later in
    # its slot than the one before, modulo the period: of any two ticks in a row, at least one
    # starts 40 ms after its due time (less what scheduling adds, far below 20 ms).
    async with pods.in_process("--tick-base-us", "120000", "--tick-groups", "1") as running:
        address = running.address
        ws = await started(address)
        async with httpx.AsyncClient(base_url=f"http://{address}") as http:
            await ticked(http, 8)
            await ws.close()
            await sessions_drop_to(address, 0)  # idle: no more ticks, both reads see one pulse
            stats = (await http.get("/live/stats")).json()
            text = (await http.get(running.admin_root + "/metrics")).text
    ticks, hist = stats["ticks"], stats["tick_lateness"]
    lower = [0.0, *hist["bounds_s"]]  # counts[i] covers (lower[i], bounds[i]], the last is +Inf
    late = sum(n for low, n in zip(lower, hist["counts"]) if low >= 0.02)
    assert sum(hist["counts"]) == ticks and late >= ticks // 2 - 1, hist
    family = next(f for f in text_string_to_metric_families(text)
                  if f.name == "liveplex_engine_tick_lateness_seconds")
    samples = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    assert samples[("liveplex_engine_tick_lateness_seconds_count", None)] == ticks
    assert samples[("liveplex_engine_tick_lateness_seconds_bucket", "0.02")] == ticks - late
    assert samples[("liveplex_engine_tick_lateness_seconds_sum", None)] >= 0.02 * late


async def test_commentary_is_acked_and_shows_as_the_sims_transcript() -> None:
    """What LiveKit's `generate_reply()` and Pipecat's opening instruction send (issue 21)."""
    async with pods.in_process() as running:
        ws = await started(running.address)
        await send(ws, {"type": "session.commentary.append", "event_id": "k1", "content": "Hello there, Ada",
                        "delegation_id": None})
        ack, _ = await until(ws, "session.commentary.appended")
        assert ack["client_event_id"] == "k1" and ack["start_ms"] == ack["end_ms"]
        words = []
        while "".join(words) != "Hello there, Ada":
            delta, _ = await until(ws, "session.output_transcript.delta")
            assert delta["start_ms"] >= ack["start_ms"]
            words.append(delta["delta"])
        await ws.close()
