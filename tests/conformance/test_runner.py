"""The checker's plumbing without a server: selection, outcomes, ordering, URLs and test audio."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio import server as ws_server

from liveplex.conformance import checks, runner, sessions, signals, target, wire
from liveplex.conformance.checklist import Check, Failed, Outcome, Skipped, Status
from liveplex.conformance.cli import line
from liveplex.gptlive import urls

TARGET = target.Target(target.Options(base_url="http://127.0.0.1:1/v1", timeout_s=0.2),
                       target.Server(config={}, stats={}, models=()))


def test_the_checklist_has_all_forty_four_items_once():
    assert [c.number for c in checks.ALL] == list(range(1, 45))
    assert len({c.name for c in checks.ALL}) == 44


@pytest.mark.parametrize("pattern, numbers", [
    (None, list(range(1, 45))),
    ("8", [8]),
    ("8,22-24", [8, 22, 23, 24]),
    ("start-*", [8, 9]),
    ("mute", [29, 30, 33]),
])
def test_only_selects_by_number_range_or_name(pattern, numbers):
    assert [c.number for c in runner.select(pattern)] == numbers


async def _passes(ctx):
    return "measured 3"


async def _fails(ctx):
    raise Failed("sent x, got y")


async def _skips(ctx):
    raise Skipped("needs --flag")


async def _crashes(ctx):
    raise ConnectionResetError("peer reset")


async def _hangs(ctx):
    await asyncio.Event().wait()


@pytest.mark.parametrize("body, status, detail", [
    (_passes, Status.PASS, "measured 3"),
    (_fails, Status.FAIL, "sent x, got y"),
    (_skips, Status.SKIP, "needs --flag"),
    (_crashes, Status.FAIL, "ConnectionResetError: peer reset"),
    (_hangs, Status.FAIL, "timed out after 0.2 s"),
])
async def test_every_ending_of_a_check_becomes_an_outcome(body, status, detail):
    outcome = await runner.run_one(Check(1, "x", body, seconds=0), TARGET, wire.Ledger())
    assert (outcome.status, outcome.detail) == (status, detail)


def _noting(ran: list):
    """Check bodies that note their name in `ran` when they run."""
    def body(name):
        async def run(ctx):
            ran.append(name)
        return run
    return body


async def test_alone_and_final_checks_run_after_the_shared_ones():
    order: list[str] = []
    body = _noting(order)
    selected = [Check(1, "final", body("final"), final=True), Check(2, "alone", body("alone"), alone=True),
                Check(3, "shared", body("shared"))]
    outcomes = await runner.run(selected, TARGET)
    assert order == ["shared", "alone", "final"]
    assert {n: o.status for n, o in outcomes.items()} == {1: Status.PASS, 2: Status.PASS, 3: Status.PASS}


async def test_shared_checks_start_longest_first_so_one_at_a_time_ends_with_the_longest():
    started: list[int] = []
    body = _noting(started)
    selected = [Check(1, "a", body(1), seconds=2.0), Check(2, "b", body(2), seconds=11.0),
                Check(3, "c", body(3), seconds=4.0), Check(4, "d", body(4), seconds=2.0)]
    one_at_a_time = target.Target(target.Options(base_url="http://h:1/v1", concurrency=1), TARGET.server)
    await runner.run(selected, one_at_a_time)
    assert started == [2, 3, 1, 4]


def test_report_lines_name_status_number_and_reason():
    assert line(8, "start-happy", Outcome(Status.FAIL, "model 'x'")) == "FAIL   8 start-happy  model 'x'"
    assert line(40, "sdk-clients", Outcome(Status.PASS)) == "PASS  40 sdk-clients"


@pytest.mark.parametrize("base, url", [
    ("http://127.0.0.1:8000/v1", "ws://127.0.0.1:8000/v1/live/sessions"),
    ("http://127.0.0.1:8000/v1/", "ws://127.0.0.1:8000/v1/live/sessions"),
    ("https://example.com/v1", "wss://example.com/v1/live/sessions"),
    ("http://h:1", "ws://h:1/live/sessions"),
])
def test_socket_url_follows_the_sdk_rule(base, url):
    assert urls.ws_url(base) == url


def test_server_settings_are_read_from_live_config():
    server = target.Server(config={"model": "liveplex-sim", "echo_frames": 3, "max_seconds": 5},
                           stats={"max_sessions": 1}, models=("liveplex-sim",))
    assert (server.is_sim, server.max_sessions, server.max_seconds) == (True, 1, 5.0)
    assert (server.int_setting("echo_frames", 6), server.int_setting("jitter_frames", 4)) == (3, 4)


@given(st.integers(min_value=80, max_value=3000))
def test_speech_is_loud_in_every_frame(ms):
    pcm = np.frombuffer(signals.speech(ms), "<i2").astype(np.float32) / 32768
    frames = pcm[: len(pcm) // 1920 * 1920].reshape(-1, 1920)
    assert (np.mean(frames * frames, axis=1) > 1e-4).all()  # the sim's loudness rule


def test_frames_in_matches_the_spec_examples():
    assert (signals.frames_in(500), signals.frames_in(5000), signals.frames_in(80)) == (6, 62, 1)


async def test_no_more_sockets_are_open_at_once_than_the_server_has_slots_and_waiting_is_not_timed():
    """Four checks of three sockets each, and four sockets besides, against 2 slots: never more than
    2 open, and a check whose own limit (0.2 s) is far shorter than its wait for slots passes."""
    budget = sessions.Sessions(2)
    holding = peak = 0

    async def hold() -> None:
        nonlocal holding, peak
        holding += 1
        peak = max(peak, holding)
        await asyncio.sleep(0.05)
        holding -= 1

    async def socket_() -> None:
        give_back = await budget.take()
        await hold()
        give_back()

    async def body(ctx):
        assert ctx.sessions is budget
        async def one():
            async with ctx.slot():
                await hold()
        await asyncio.gather(*(one() for _ in range(3)))

    others = [asyncio.create_task(socket_()) for _ in range(4)]
    outcomes = await asyncio.gather(*(runner.run_one(Check(n, "x", body, seconds=0), TARGET, wire.Ledger(), budget)
                                      for n in range(4)))
    await asyncio.gather(*others)
    assert {o.status for o in outcomes} == {Status.PASS}
    assert peak <= 2


def test_concurrency_never_exceeds_the_capacity():
    def tgt(concurrency, capacity):
        return target.Target(target.Options(base_url="http://h:1/v1", concurrency=concurrency,
                                            expect_capacity=capacity), TARGET.server)
    assert [runner.concurrency(tgt(8, c)) for c in (None, 1, 4, 64)] == [8, 1, 4, 8]


async def test_the_idle_guard_is_timed_from_the_dial_not_from_a_slow_handshake():
    """A server that guards 1 s from the request and answers its handshake 0.6 s late closes at
    1 s however it is timed from the dial, and 0.4 s after the handshake: timed from there (as
    before) the check failed a correct guard whenever a busy machine slowed the handshake."""
    loop = asyncio.get_running_loop()
    guarded: dict[object, float] = {}

    async def slow_handshake(connection, request):
        guarded[connection] = loop.time()
        await asyncio.sleep(0.6)

    async def guard(connection) -> None:
        await asyncio.sleep(guarded[connection] + 1.0 - loop.time())
        await connection.close(1000)

    async with ws_server.serve(guard, "127.0.0.1", 0, process_request=slow_handshake) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        options = target.Options(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=5, idle_guard_s=1.0)
        outcome = await runner.run_one(checks.handshake.CHECKS[2], target.Target(options, TARGET.server),
                                       wire.Ledger())
    assert outcome.status == Status.PASS, outcome.detail
    assert outcome.detail.startswith("nothing received; closed 1000 after 1.")
