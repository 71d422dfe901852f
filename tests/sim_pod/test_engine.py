"""The sim engine under the real drive loop on its thread: live-contract §14 item 26."""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

from liveplex.live import Audio, Closed, CloseReason, Session, Started, Text, by_hand, runner
from liveplex.live.channel import Opened
from liveplex.live.fault import InjectedFault, failing_after
from liveplex.live.runner import EngineThread
from liveplex.sim_pod import SimEngine, SimProfile

from ..live.outputs import until

SESSION = Session(voice="NATF2", instructions="x")


async def test_one_slot_busy_contiguous_frames_and_hangup() -> None:
    profile = SimProfile(max_sessions=1)
    engine = EngineThread(profile.info(), lambda _: SimEngine(profile))
    handle = engine.start(asyncio.get_running_loop())
    a = handle.start(SESSION)
    assert isinstance(a, Opened)
    first = await until(a, Audio)
    assert first[0] == Started()
    b = handle.start(SESSION)
    assert isinstance(b, Opened)
    assert await until(b, Closed) == [Closed.refused(CloseReason.BUSY)]
    got = first + await until(a, Audio)
    while sum(isinstance(o, Audio) for o in got) < 4:
        got += await until(a, Audio)
    n = [o.frame for o in got if isinstance(o, Audio)]
    assert n == list(range(len(n)))
    a.audio.close()
    end = (await until(a, Closed))[-1]
    assert end.reason is CloseReason.HANGUP and end.frames >= len(n)
    handle.close()
    await asyncio.to_thread(engine.stop)
    assert engine.failed is None


async def test_loud_caller_is_echoed_six_frames_late_with_words() -> None:
    # a buffer deep enough for the whole call, so nothing depends on when the appends land
    profile = SimProfile(echo_frames=6, jitter_frames=40, prebuffer_frames=1)
    engine = EngineThread(profile.info(), lambda _: SimEngine(profile))
    handle = engine.start(asyncio.get_running_loop())
    a = handle.start(SESSION)
    assert isinstance(a, Opened)
    tone = (np.sin(np.arange(1920 * 30) * 0.05) * 12000).astype("<i2").tobytes()
    a.audio.send(tone)
    got: list = []
    while sum(isinstance(o, Audio) for o in got) < 20:
        got += await asyncio.wait_for(a.output.next(), 5)
    audio = [o for o in got if isinstance(o, Audio)]
    loud = [i for i, o in enumerate(audio) if np.abs(np.frombuffer(o.pcm, "<i2")).max() > 1000]
    # the first tick may run before the first append lands, so the echo starts at frame >= 6,
    # and from there it is the caller's audio, frame by frame, with nothing lost or reordered
    k = loud[0]
    assert k >= 6
    for i, o in enumerate(audio[k:]):
        assert o.pcm == tone[i * 3840:(i + 1) * 3840]
    text = "".join(o.delta for o in got if isinstance(o, Text))
    assert text.startswith("I hear")
    a.audio.close()
    await until(a, Closed)
    handle.close()
    await asyncio.to_thread(engine.stop)


@pytest.mark.parametrize("head", [0, 1])
def test_a_caller_frame_is_echoed_prebuffer_plus_echo_frames_ticks_after_it_is_sent(head: int) -> None:
    """Issue 12: a session hears its caller from its first tick. A real-time caller sends one frame
    before each tick (`head` more at once before the first); before tick t `head + t` frames are
    queued, so frame 0 plays in tick `prebuffer - head` and comes back `echo_frames` ticks later."""
    profile = SimProfile(prebuffer_frames=2, echo_frames=6)
    handle, inbox = by_hand.live_channel(profile.info())  # the test drains, drive's steps by hand
    engine = SimEngine(profile)
    a = handle.start(SESSION)
    assert isinstance(a, Opened)
    sent = [np.full(1920, 1000 + 100 * i, "<i2").tobytes() for i in range(16)]  # loud, each its own
    for pcm in sent[:head]:
        a.audio.send(pcm)
    echoed: list[tuple[int, bytes]] = []
    for tick, pcm in enumerate(sent[head:12], start=1):
        a.audio.send(pcm)
        for sub in inbox.drain_nowait():
            engine.take(sub)
        engine.tick(0)
        echoed += [(tick, o.pcm) for o in a.output.drain() if isinstance(o, Audio) and o.pcm in sent]
    assert echoed[0] == (profile.prebuffer_frames - head + profile.echo_frames, sent[0])
    assert [pcm for _, pcm in echoed] == sent[:len(echoed)]  # then one frame a tick, in order


async def test_injected_fault_aborts_every_session_and_stops_the_engine() -> None:
    profile = SimProfile()
    engine = EngineThread(profile.info(), failing_after(lambda _: SimEngine(profile), 3))
    handle = engine.start(asyncio.get_running_loop())
    a, b = handle.start(SESSION), handle.start(SESSION)
    for o in (a, b):
        assert isinstance(o, Opened)
        assert (await until(o, Closed))[-1].reason is CloseReason.ABORTED
    await asyncio.to_thread(engine.stop)
    assert isinstance(engine.failed, InjectedFault) and not engine.ready


async def test_starting_an_engine_lowers_the_gil_switch_interval_so_a_due_tick_waits_about_1_ms() -> None:
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # the interpreter's default
    try:
        profile = SimProfile(max_sessions=1)
        engine = EngineThread(profile.info(), lambda _: SimEngine(profile))
        engine.start(asyncio.get_running_loop())
        assert sys.getswitchinterval() == pytest.approx(runner.SWITCH_INTERVAL_S)
        sys.setswitchinterval(0.0001)  # a smaller one set by the operator is kept
        EngineThread(profile.info(), lambda _: SimEngine(profile)).start(asyncio.get_running_loop()).close()
        assert sys.getswitchinterval() == pytest.approx(0.0001)
        engine.stop()
    finally:
        sys.setswitchinterval(before)
