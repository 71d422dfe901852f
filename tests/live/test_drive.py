"""The drive loop and `Line` with a hand-made engine: live-contract §14 items 12-23."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from liveplex.live import Audio, Closed, CloseReason, LiveInfo, Pacing, Session, Started, Text, by_hand
from liveplex.live.channel import LiveHandle, LiveInbox, Opened, Rejected, live_channel
from liveplex.live.drive import EngineError, Pending, drive

from .engines import Silent
from .outputs import audio_frames, until

SESSION = Session(voice="NATF2", instructions="hi")


def make_info(max_sessions: int = 4, max_frames: int = 3000, tick_groups: int = 1) -> LiveInfo:
    return LiveInfo(model="m", sample_rate=24000, frame_samples=1920, voices=("NATF2",),
                    default_voice="NATF2", default_instructions="hi", max_instructions_chars=100,
                    max_sessions=max_sessions, max_frames=max_frames, tick_groups=tick_groups)


class Pod:
    """drive on a thread, outputs on the test's loop."""

    def __init__(self, engine: Silent, handle: LiveHandle, inbox: LiveInbox, now_ns=None,
                 pacing: Pacing | None = None) -> None:
        self.engine, self.handle, self.inbox = engine, handle, inbox
        self.error: BaseException | None = None
        kwargs = ({} if now_ns is None else {"now_ns": now_ns}) | ({} if pacing is None else {"pacing": pacing})

        def run() -> None:
            try:
                drive(inbox, engine, **kwargs)
            except BaseException as exc:  # the test inspects it
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.handle.close()
        self.thread.join(10)
        assert not self.thread.is_alive()


async def pod(info: LiveInfo, **kw) -> Pod:
    handle, inbox = live_channel(info, loop=asyncio.get_running_loop())
    return Pod(Silent(info, kw.pop("during_tick", None)), handle, inbox, **kw)


def start(p: Pod) -> Opened:
    opened = p.handle.start(SESSION)
    assert isinstance(opened, Opened)
    return opened


async def test_with_no_sessions_no_tick_runs_and_closing_ends_drive() -> None:
    p = await pod(make_info())
    p.finish()
    assert p.inbox.pulse.ticks == 0 and p.engine.skips == []


async def test_first_admission_after_idle_ticks_at_once_without_skips() -> None:
    now = [0]
    p = await pod(make_info(), now_ns=lambda: now[0])
    now[0] = 37 * 80_000_000 + 123  # a long idle, not on a slot boundary
    a = start(p)
    await until(a, Audio)
    assert p.engine.skips[0] == 0
    a.audio.close()
    now[0] += 80_000_000
    await until(a, Closed)
    p.finish()


async def test_cap_refuses_the_second_session_busy_and_the_first_runs_on() -> None:
    p = await pod(make_info(max_sessions=1))
    a = start(p)
    await until(a, Audio)
    b = start(p)
    assert await until(b, Closed) == [Closed.refused(CloseReason.BUSY)]
    got = await until(a, Audio)
    assert all(isinstance(o, Audio) for o in got)
    a.audio.close()
    out = await until(a, Closed)
    assert out[-1].reason is CloseReason.HANGUP
    p.finish()


async def test_sessions_queued_during_a_wait_join_before_the_next_tick() -> None:
    p = await pod(make_info())
    a = start(p)
    await until(a, Audio)
    b = start(p)  # arrives while drive waits for the next slot
    c = start(p)
    await until(b, Audio)
    await until(c, Audio)
    # no tick ran with a only once b and c were submitted before it: batches never shrink
    assert p.engine.batches == sorted(p.engine.batches)
    for o in (a, b, c):
        o.audio.close()
        await until(o, Closed)
    p.finish()


async def test_an_export_is_answered_right_after_the_next_tick_with_that_ticks_frame_its_last() -> None:
    now = [0]
    p = await pod(make_info(), now_ns=lambda: now[0])
    a = start(p)
    await until(a, Audio)  # tick 0, at once
    now[0] = 30_000_000  # between ticks: asked here, it waits for tick 1
    asked = asyncio.wrap_future(p.handle.export(a.id))
    await asyncio.sleep(0.05)
    assert not asked.done() and p.inbox.pulse.ticks == 1
    now[0] = 80_000_000
    assert await asked == b"2"  # frames 0 and 1 ran here: the next pod says frame 2
    out = await until(a, Closed)
    assert [type(o) for o in out] == [Audio, Closed] and out[-1].reason is CloseReason.HANDED_OVER
    assert await asyncio.wrap_future(p.handle.export(a.id)) is None  # gone, and nothing runs: at once
    p.finish()


async def test_an_export_the_engine_defers_is_asked_again_after_the_next_tick() -> None:
    class Deferring(Silent):
        asked = 0

        def export(self, session_id: int, park: bool = False) -> bytes | Pending | None:
            self.asked += 1
            return Pending.NEXT_TICK if self.asked == 1 else super().export(session_id, park)

    now = [0]
    handle, inbox = live_channel(make_info(), loop=asyncio.get_running_loop())
    p = Pod(Deferring(make_info()), handle, inbox, now_ns=lambda: now[0])
    a = start(p)
    await until(a, Audio)  # tick 0
    asked = asyncio.wrap_future(p.handle.export(a.id))
    now[0] = 80_000_000  # tick 1: deferred
    await asyncio.sleep(0.05)
    assert not asked.done() and p.engine.asked == 1
    now[0] = 160_000_000  # tick 2: answered
    assert await asked == b"3"
    p.finish()


async def test_an_export_that_faults_the_engine_still_answers_every_export_asked() -> None:
    p = await pod(make_info())
    a, b = start(p), start(p)
    await until(a, Audio)
    await until(b, Audio)

    def fault(session_id: int, park: bool = False) -> bytes | None:
        raise RuntimeError("export fault")

    p.engine.export = fault  # type: ignore[method-assign]
    asked = [asyncio.wrap_future(p.handle.export(o.id)) for o in (a, b)]
    assert await asyncio.wait_for(asyncio.gather(*asked), 5) == [None, None]
    p.thread.join(10)
    assert isinstance(p.error, RuntimeError)


async def test_an_overrun_reports_whole_skipped_ticks_and_counts_them_late() -> None:
    period = 80_000_000
    now = [0]

    def stall(n: int) -> None:
        if n == 1:  # tick 0 runs 3.5 periods: slots 1 and 2 are missed, tick 3 runs next
            now[0] += 3 * period + period // 2

    p = await pod(make_info(), now_ns=lambda: now[0], during_tick=stall)
    a = start(p)
    await audio_frames(a, 2)
    assert p.engine.skips[:2] == [0, 2]
    assert p.inbox.pulse.late_ticks == 2
    a.audio.close()
    now[0] += 10 * period
    await until(a, Closed)
    p.finish()


async def test_tick_groups_take_turns_within_the_period_each_told_when_it_was_due() -> None:
    """Four groups: sub-tick k (every 20 ms) runs group k mod 4, due at epoch + k · 20 ms; an
    overrun past a whole period tells the group that runs next the periods it missed."""
    sub = 20_000_000
    now = [1_000]

    def clock(n: int) -> None:
        now[0] += 20 * sub if n == 6 else sub  # tick 5 (the 6th) runs 20 sub-ticks: 5 periods

    p = await pod(make_info(tick_groups=4), now_ns=lambda: now[0], during_tick=clock)
    a = start(p)
    await audio_frames(a, 10)  # one frame a tick: the ten ticks read below have run
    beats, skips = p.engine.beats, p.engine.skips
    assert beats[:6] == [(k % 4, 1_000 + k * sub) for k in range(6)]
    # sub-ticks 6..24 missed: the last period's three (22, 23, 24) run late, each group told the
    # four turns it lost before them (group 2: 6, 10, 14, 18), then 25 on time
    assert beats[6:10] == [(k % 4, 1_000 + k * sub) for k in (22, 23, 24, 25)]
    assert skips[6:10] == [4, 4, 4, 4]
    assert p.inbox.pulse.late_ticks == 19 - 3
    a.audio.close()
    now[0] += 100 * sub
    await until(a, Closed)
    p.finish()


async def test_a_group_late_by_less_than_a_period_still_takes_its_turn() -> None:
    sub = 20_000_000
    now = [0]

    def clock(n: int) -> None:
        now[0] += 45_000_000 if n == 2 else sub  # tick 1 runs 45 ms: sub-ticks 2 and 3 are due meanwhile

    p = await pod(make_info(tick_groups=4), now_ns=lambda: now[0], during_tick=clock)
    a = start(p)
    await audio_frames(a, 5)
    assert [g for g, _ in p.engine.beats[:5]] == [0, 1, 2, 3, 0] and p.engine.skips[:5] == [0] * 5
    assert p.inbox.pulse.late_ticks == 0
    a.audio.close()
    now[0] += 100 * sub
    await until(a, Closed)
    p.finish()


async def test_a_late_tick_is_recorded_with_exactly_its_lateness() -> None:
    period = 80_000_000
    now = [0]

    def stall(n: int) -> None:
        if n == 1:  # tick 0 runs past tick 1's slot: tick 2, due at 2 periods, starts 30 ms late
            now[0] += 2 * period + 30_000_000

    p = await pod(make_info(), now_ns=lambda: now[0], during_tick=stall)
    a = start(p)
    await audio_frames(a, 2)
    lateness = p.inbox.pulse.lateness
    at_most = dict(zip(lateness.bounds, lateness.cumulative()))  # Prometheus' `le` buckets
    assert (at_most[0.001], at_most[0.02], at_most[0.04]) == (1, 1, 2)  # tick 0 on time, tick 2 late
    assert lateness.total == pytest.approx(0.030)
    a.audio.close()
    now[0] += 10 * period
    await until(a, Closed)
    p.finish()


async def test_a_ticks_frames_leave_lead_after_it_was_due_whatever_the_tick_took() -> None:
    now = [0]
    ran_at: list[int] = []

    def compute(n: int) -> None:  # tick 0, due at 0, takes 3 ms of the drive clock
        ran_at.append(time.perf_counter_ns())
        now[0] += 3_000_000

    p = await pod(make_info(), now_ns=lambda: now[0], during_tick=compute, pacing=Pacing(lead_ns=12_000_000))
    a = start(p)
    assert await until(a, Started) == [Started()]  # a start leaves at once
    await audio_frames(a, 1)
    arrived = time.perf_counter_ns()
    assert arrived - ran_at[0] >= 9_000_000 - 1_500_000  # due + 12 ms, 3 ms of it spent in the tick
    a.audio.close()
    now[0] += 10 * 80_000_000
    await until(a, Closed)
    p.finish()


async def test_drive_ends_only_after_running_sessions_end() -> None:
    p = await pod(make_info())
    a = start(p)
    await until(a, Audio)
    p.handle.close()
    await until(a, Audio)  # still ticking with no handle left
    assert p.thread.is_alive()
    a.audio.close()
    await until(a, Closed)
    p.thread.join(5)
    assert not p.thread.is_alive() and p.error is None


async def test_a_tick_exception_stops_drive_and_aborts_every_session() -> None:
    def boom(n: int) -> None:
        if n == 3:
            raise EngineError("model fault")

    p = await pod(make_info(), during_tick=boom)
    a, b = start(p), start(p)
    for o in (a, b):
        out = await until(o, Closed)
        assert out[-1].reason is CloseReason.ABORTED
        assert out[0] == Started()
    p.thread.join(5)
    assert isinstance(p.error, EngineError)
    assert p.handle.start(SESSION) is Rejected.STOPPED
    assert p.inbox.pulse.sessions == 0


def test_start_never_blocks_full_then_stopped() -> None:
    handle, inbox = by_hand.live_channel(make_info(), queue=2)
    assert isinstance(handle.start(SESSION), Opened)
    assert isinstance(handle.start(SESSION), Opened)
    assert handle.start(SESSION) is Rejected.FULL
    inbox.stop()
    assert handle.start(SESSION) is Rejected.STOPPED


async def test_frames_are_contiguous_and_text_follows_its_audio() -> None:
    info = make_info()
    handle, inbox = live_channel(info, loop=asyncio.get_running_loop())
    p = Pod(Silent(info, words=iter(["", "one", None, " two"])), handle, inbox)
    a = start(p)
    got = await audio_frames(a, 6)
    a.audio.close()
    got += await until(a, Closed)
    frames = [o.frame for o in got if isinstance(o, Audio)]
    assert frames == list(range(len(frames)))
    for i, o in enumerate(got):
        if isinstance(o, Text):
            assert o.delta and isinstance(got[i - 1], Audio) and got[i - 1].frame == o.frame
    assert [o.delta for o in got if isinstance(o, Text)] == ["one", " two"]
    p.finish()


async def test_a_session_runs_exactly_max_frames_then_expires() -> None:
    p = await pod(make_info(max_frames=5))
    a = start(p)
    got = await until(a, Closed)
    assert [o.frame for o in got if isinstance(o, Audio)] == [0, 1, 2, 3, 4]
    assert got[-1] == Closed(CloseReason.EXPIRED, 5, 0, 0)
    p.finish()


async def test_hangup_reports_frames_underruns_and_drops() -> None:
    p = await pod(make_info())
    a = start(p)
    a.audio.send(bytes(3840 * 6))  # 6 frames at once: 2 dropped past the 4-frame cap
    await audio_frames(a, 6)
    a.audio.close()
    out = (await until(a, Closed))[-1]
    assert out.reason is CloseReason.HANGUP
    assert out.frames >= 6 and out.underruns == 1 and out.dropped == 2 * 1920
    p.finish()


async def test_a_closed_receiver_drops_the_line_without_closed() -> None:
    p = await pod(make_info())
    a, b = start(p), start(p)
    await until(a, Audio)
    a.output.close()
    a.output.drain()  # what was queued before the close
    await audio_frames(b, 2)
    assert p.engine.sessions() == 1  # a was dropped silently
    assert a.output.drain() == []  # nothing after the close, no Closed either
    b.audio.close()
    await until(b, Closed)
    p.finish()


def test_a_garbage_collected_sender_hangs_up() -> None:
    handle, inbox = by_hand.live_channel(make_info())
    opened = handle.start(SESSION)
    assert isinstance(opened, Opened)
    sub = inbox.get(0)
    receiver = sub.input
    del opened  # the front end's handler died without closing its audio sender
    import gc
    gc.collect()
    assert receiver.closed


@pytest.mark.parametrize("n", [1, 3])
async def test_pulse_counts_ticks_and_sessions(n: int) -> None:
    p = await pod(make_info())
    sessions = [start(p) for _ in range(n)]
    for s in sessions:
        await audio_frames(s, 2)
    assert p.inbox.pulse.ticks >= 2 and p.inbox.pulse.sessions == n
    for s in sessions:
        s.audio.close()
        await until(s, Closed)
    p.finish()
    assert p.inbox.pulse.batch.cumulative()[-1] == p.inbox.pulse.ticks
