"""A sim session exported at tick k and imported into another sim continues exactly (issue 24)."""

from __future__ import annotations

import numpy as np
import pytest

from liveplex.continuity import Code, blob
from liveplex.live import Audio, Closed, CloseReason, Session, Started, Text
from liveplex.live.channel import LiveHandle, Opened, live_channel
from liveplex.sim_pod import SimEngine, SimProfile

SESSION = Session(voice="NATF2", instructions="x")
PROFILE = SimProfile(echo_frames=3, word_frames=2, prebuffer_frames=2, jitter_frames=5)
TICKS = 24


def caller(seed: int) -> list[bytes]:
    """Frames of loud tone and silence in a seeded pattern, each frame distinct."""
    rng = np.random.default_rng(seed)
    loud = rng.random(TICKS) < 0.6
    t = np.arange(1920)
    return [((np.sin(t * (0.02 + 0.001 * i)) * (9000 if loud[i] else 20)) + i).astype("<i2").tobytes()
            for i in range(TICKS)]


class Pod:
    """A sim engine with its channel, stepped by hand as `drive` would."""

    def __init__(self) -> None:
        self.handle, self.inbox = live_channel(PROFILE.info())
        self.engine = SimEngine(PROFILE)

    def tick(self) -> None:
        for sub in self.inbox.drain_nowait():
            self.engine.take(sub)  # type: ignore[arg-type]
        self.engine.tick(0)


def _run(pod: Pod, sends: list[list[bytes]], opened: Opened, ticks: range, out: list) -> None:
    for t in ticks:
        for pcm in sends[t]:
            opened.audio.send(pcm)
        if t == 5:
            opened.audio.say("hello there")
        pod.tick()
        out += opened.output.drain()


def _frames(outputs: list) -> list[tuple[str, int, object]]:
    return [("a", o.frame, o.pcm) if isinstance(o, Audio) else ("t", o.frame, o.delta)
            for o in outputs if isinstance(o, Audio | Text)]


def _start(handle: LiveHandle, n: int) -> list[Opened]:
    out = [handle.start(SESSION) for _ in range(n)]
    assert all(isinstance(o, Opened) for o in out)
    return out  # type: ignore[return-value]


@pytest.mark.parametrize("k", [1, 2, 4, 9, 17])
def test_a_session_moved_at_tick_k_plays_and_says_what_it_would_have(k: int) -> None:
    audio = caller(k)
    # uneven sends: two frames at once now and then, so a move finds audio in the jitter buffer
    sends = [[audio[t]] if t % 7 != 3 else [] for t in range(TICKS)]
    for t in range(TICKS):
        if t % 7 == 3 and t + 1 < TICKS:
            sends[t + 1] = [audio[t], audio[t + 1]]
    ref, a, b = Pod(), Pod(), Pod()
    neighbours = _start(ref.handle, 1) + _start(a.handle, 2) + _start(b.handle, 1)  # in every batch
    (want_call,) = _start(ref.handle, 1)
    (moved,) = _start(a.handle, 1)
    want: list = []
    _run(ref, sends, want_call, range(TICKS), want)
    got: list = []
    _run(a, sends, moved, range(k), got)
    for pcm in sends[k]:  # audio sent before the boundary travels in the blob
        moved.audio.send(pcm)
    state = a.engine.export(moved.id)
    assert state is not None
    got += moved.output.drain()
    assert got[-1] == Closed(CloseReason.HANDED_OVER, k, 0, 0) and moved.output.ended
    assert a.engine.sessions() == 2
    resumed = b.handle.resume(SESSION, state)
    assert isinstance(resumed, Opened)
    after: list = []
    sends_after = [[] for _ in range(k + 1)] + sends[k + 1:]
    _run(b, sends_after, resumed, range(k, TICKS), after)
    assert after[0] == Started(k)  # the frames it ran before: numbering and usage go on
    assert _frames(got) + _frames(after) == _frames(want)
    assert sum(isinstance(o, Text) for o in want) >= 3  # words and commentary were compared
    assert b.engine.sessions() == 2 and all(not n.output.ended for n in neighbours)


def test_export_of_a_session_that_does_not_run_or_hung_up_is_none_and_leaves_it() -> None:
    pod = Pod()
    (call,) = _start(pod.handle, 1)
    assert pod.engine.export(call.id) is None  # not taken yet
    pod.tick()
    assert pod.engine.export(call.id + 7) is None
    call.audio.close()
    assert pod.engine.export(call.id) is None and pod.engine.sessions() == 1
    pod.tick()
    assert call.output.drain()[-1].reason is CloseReason.HANGUP


def _blob() -> bytes:
    pod = Pod()
    (call,) = _start(pod.handle, 1)
    pod.tick()
    state = pod.engine.export(call.id)
    assert state is not None
    return state


@pytest.mark.parametrize("profile, voice", [
    (SimProfile(echo_frames=4), "NATF2"),      # another echo: refused on `engine.echo_frames`
    (PROFILE, "NATM1"),                        # the start asks for another voice
    (SimProfile(model="other-sim", echo_frames=3), "NATF2"),
])
def test_an_engine_that_cannot_continue_the_session_refuses_it_before_started(profile: SimProfile, voice: str) -> None:
    handle, inbox = live_channel(profile.info())
    engine = SimEngine(profile)
    opened = handle.resume(Session(voice=voice, instructions="x"), _blob())
    assert isinstance(opened, Opened)
    for sub in inbox.drain_nowait():
        engine.take(sub)  # type: ignore[arg-type]
    assert opened.output.drain() == [Closed.refused(CloseReason.ABORTED)] and engine.sessions() == 0


def test_the_check_names_the_field_that_differs() -> None:
    h = blob.decode(_blob())
    assert isinstance(h, blob.Handover)
    err = blob.check(h.header, SimProfile(echo_frames=4).info())
    assert err is not None and err.code is Code.ENGINE and err.param == "header.engine.echo_frames"
    assert blob.check(h.header, PROFILE.info()) is None
    assert len(_blob()) < 2 * 1920 * (PROFILE.echo_frames + PROFILE.jitter_frames) + 1024


async def test_under_the_drive_loop_an_export_is_answered_between_ticks_and_none_once_stopped() -> None:
    import asyncio

    from liveplex.live.runner import EngineThread

    from ..live.outputs import until

    engine = EngineThread(PROFILE.info(), lambda _: SimEngine(PROFILE))
    handle = engine.start(asyncio.get_running_loop())
    (call,) = _start(handle, 1)
    await until(call, Audio)
    state = await asyncio.wrap_future(handle.export(call.id))
    assert state is not None and blob.decode(state).header.frames >= 1  # type: ignore[union-attr]
    assert (await until(call, Closed))[-1].reason is CloseReason.HANDED_OVER
    assert await asyncio.wrap_future(handle.export(call.id)) is None  # gone: nothing to export
    handle.close()
    await asyncio.to_thread(engine.stop)
    assert handle.export(call.id).result(0) is None and engine.failed is None
