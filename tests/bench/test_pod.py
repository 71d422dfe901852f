"""The bench against a real pod in process: end to end (§13.6), the knee, and the baseline side
by side."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from liveplex.bench import audio, caller, duplex, pool, target
from tests.support import pods


@contextlib.asynccontextmanager
async def in_process_pod(*flags: str) -> AsyncIterator[str]:
    """`liveplex serve --engine sim FLAGS` in process; yields its base URL."""
    async with pods.in_process(*flags) as running:
        yield running.base_url


async def test_four_sessions_of_synthetic_speech_against_the_sim_pod() -> None:
    """live-contract §13.6: 4 sessions × 1.5 s all succeed, echoing and transcribing."""
    async with in_process_pod() as base_url:
        pod = target.Target("pod", base_url)
        (model, *_) = await pod.models()
        settings = caller.CallSettings(
            url=pod.sessions_url, model=model, voice=None, instructions=None,
            audio_format="audio/pcm", rate=24000, seconds=1.5, chunk_ms=20, playout_ms=120)
        with pool.Pool(1) as clients:
            verdict, results = await duplex.run_level(
                clients, pod, settings, audio.Source(None, True, 0), 4, 20)
    assert verdict.ok == 4, verdict.errors
    for result in results:
        assert result.frames >= 15
        assert result.close_reason == "close_requested"
        assert result.transcript.startswith("I hear"), result.transcript
    assert verdict.server["ticks"] > 0


async def test_the_ramp_finds_the_knee_of_the_sim_cost_curve() -> None:
    """2 ms + 15 ms per session fits 5 sessions in an 80 ms tick: clean at 4, not at 7 (the
    small-scale version of issue 3's 24/32 check with 2 + 3 ms)."""
    async with in_process_pod("--tick-base-us", "2000", "--tick-per-session-us", "15000") as url:
        settings = duplex.parse(["--base-url", url, "--ramp", "4,7,8", "--seconds", "1.5",
                                 "--no-progress"])
        report, verdicts = await duplex.bench(settings)
    assert duplex.exit_code(verdicts, strict=False) == 0
    assert duplex.exit_code(verdicts, strict=True) == duplex.EXIT_UNCLEAN
    levels = report["levels"]
    assert [(lv["sessions"], lv["clean"]) for lv in levels] == [(4, True), (7, False)]
    assert report["largest_clean"] == 4
    assert levels[1]["late_ms"]["p99"] > 120  # behind by more than the playout buffer
    assert levels[1]["server"]["late_ticks"] > 0


async def test_vs_baseline_runs_both_servers_and_compares_them() -> None:
    async with in_process_pod() as url:
        settings = duplex.parse(["--base-url", url, "--sessions", "2", "--seconds", "1",
                                 "--chunk-ms", "80", "--vs-baseline", "--no-progress"])
        report, levels = await duplex.bench(settings)
    assert duplex.exit_code(levels, strict=True) == 0
    assert [lv["target"] for lv in report["levels"]] == ["pod", "baseline-json"]
    comparison = report["comparison"]
    assert comparison["pod_capacity"] == comparison["baseline_capacity"] == 2
    assert comparison["capacity_ratio"] == 1.0
    assert comparison["baseline_cpu_us_per_frame"] > 0
    assert comparison["pod_cpu_us_per_frame"] is None  # no --server-pid for an in-process pod


async def test_echo_rtt_sits_above_each_servers_floor_and_within_a_tick_of_it_when_idle() -> None:
    """The sim publishes its echo (6): the ideal 6 · 80 = 480 ms; the baseline echoes at once
    (floor 0). Nothing comes back below a floor; a lightly loaded pod sits within a tick of it, and
    4 ticks is the generous bound here."""
    async with in_process_pod() as url:
        settings = duplex.parse(["--base-url", url, "--sessions", "3", "--seconds", "2", "--echo-rtt",
                                 "--vs-baseline", "--no-progress"])
        report, levels = await duplex.bench(settings)
    assert duplex.exit_code(levels, strict=False) == 0
    floors = report["echo_rtt_floor"]
    assert floors["pod"]["ms"] == 480.0 and floors["pod"]["source"].startswith("/live/config")
    assert floors["baseline-json"]["ms"] == 0.0
    for lv in report["levels"]:
        rtt, floor = lv["echo_rtt_ms"], lv["echo_floor_ms"]
        assert rtt.keys() == lv["late_ms"].keys()
        assert rtt["count"] >= 3 * 10  # most of 3 × 25 frames come back before the close
        assert floor <= rtt["p50"] < floor + 4 * 80, lv["target"]
        assert lv["echo_above_floor_ms"]["p50"] == round(rtt["p50"] - floor, 3)


def test_echo_rtt_is_refused_where_the_echo_cannot_come_back_byte_for_byte(capsys) -> None:
    for flags in (["--format", "audio/pcmu", "--rate", "8000"], ["--rate", "16000"]):
        with pytest.raises(SystemExit) as exited:
            duplex.parse(["--echo-rtt", *flags])
        assert exited.value.code == 2
        assert "--echo-rtt needs --format audio/pcm at --rate 24000" in capsys.readouterr().err
