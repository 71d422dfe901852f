"""The bench client against the bare baseline server, both variants, in process."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import sys
from collections.abc import AsyncIterator

import orjson
import pytest

from liveplex.bench import audio, baseline, caller, duplex, pool, target


@pytest.fixture(params=baseline.VARIANTS)
async def baseline_target(request: pytest.FixtureRequest) -> AsyncIterator[target.Target]:
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(baseline.serve(request.param, "127.0.0.1", 0, ready))
    port = await ready
    yield target.Target(f"baseline-{request.param}", f"http://127.0.0.1:{port}/v1")
    server.cancel()
    await asyncio.gather(server, return_exceptions=True)


def _settings(url: str, seconds: float, chunk_ms: int) -> caller.CallSettings:
    return caller.CallSettings(url=url, model="m", voice=None, instructions=None,
                               audio_format="audio/pcm", rate=24000, seconds=seconds,
                               chunk_ms=chunk_ms, playout_ms=120)


@pytest.mark.parametrize("chunk_ms", [20, 80])
async def test_every_80_ms_of_input_comes_back_as_one_frame(
    baseline_target: target.Target, chunk_ms: int
) -> None:
    settings = _settings(baseline_target.sessions_url, 0.8, chunk_ms)
    with pool.Pool(1) as clients:
        verdict, results = await duplex.run_level(
            clients, baseline_target, settings, audio.Source(None, False, 0), 3, 20)
    assert verdict.ok == 3, verdict.errors
    assert [r.frames for r in results] == [10, 10, 10]
    assert all(r.close_reason == "close_requested" for r in results)
    assert verdict.frames == 30 and verdict.audio_s == pytest.approx(2.4)


async def test_worker_processes_pool_their_results_in_session_order(
    baseline_target: target.Target,
) -> None:
    settings = _settings(baseline_target.sessions_url, 0.4, 80)
    with pool.Pool(2) as clients:
        verdict, results = await duplex.run_level(
            clients, baseline_target, settings, audio.Source(None, True, 0), 3, 20)
        assert clients.counts() == (3, 3, 0, 15)
    assert verdict.ok == 3, verdict.errors
    assert [r.frames for r in results] == [5, 5, 5]


async def test_the_baseline_lists_a_model(baseline_target: target.Target) -> None:
    assert await baseline_target.models() == [baseline.MODEL]
    assert await baseline_target.stats() is None


def test_a_run_with_failed_sessions_exits_2_and_reports_why(tmp_path: object) -> None:
    out = f"{tmp_path}/report.json"
    code = duplex.main(["--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--sessions", "2",
                        "--seconds", "0.2", "--no-progress", "--out", out])
    assert code == duplex.EXIT_FAILED
    with open(out, "rb") as f:
        report = orjson.loads(f.read())
    assert report["largest_clean"] is None
    assert [r["error"].startswith("connect failed") for r in report["records"][0]] == [True, True]


@pytest.mark.parametrize("audio_format", ["audio/pcmu", "audio/pcma"])
async def test_g711_sessions_count_one_byte_per_sample(audio_format: str) -> None:
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(baseline.serve("json", "127.0.0.1", 0, ready))
    port = await ready
    settings = dataclasses.replace(
        _settings(f"ws://127.0.0.1:{port}/v1/live/sessions", 0.8, 20),
        audio_format=audio_format, rate=8000)
    try:
        with pool.Pool(1) as clients:
            verdict, results = await duplex.run_level(
                clients, target.Target("baseline-json", f"http://127.0.0.1:{port}/v1"), settings,
                audio.Source(None, False, 0), 2, 20)
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
    assert verdict.ok == 2, verdict.errors
    assert [r.frames for r in results] == [10, 10]
    assert verdict.audio_s == pytest.approx(1.6)



def test_serve_cmd_starts_the_server_samples_its_cpu_and_stops_it(tmp_path: object) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = f"{tmp_path}/report.json"
    code = duplex.main([
        "--serve-cmd", f"{sys.executable} -m liveplex.cli bench baseline --port {port}",
        "--base-url", f"http://127.0.0.1:{port}/v1", "--sessions", "2", "--seconds", "0.5",
        "--chunk-ms", "80", "--no-progress", "--out", out])
    assert code == 0
    with open(out, "rb") as f:
        (only,) = orjson.loads(f.read())["levels"]
    assert only["ok"] == 2 and only["cpu_s"] is not None and only["cpu_s"] >= 0
    with pytest.raises(OSError):  # stopped at the end of the run
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_serve_cmd_that_cannot_start_exits_1_naming_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    code = duplex.main(["--serve-cmd", "no-such-liveplex-binary serve", "--sessions", "1", "--seconds", "0.5",
                        "--no-progress"])
    assert code == 1
    assert "cannot start the pod with 'no-such-liveplex-binary'" in capsys.readouterr().err
