"""The paced fan-out: the waves of a tick's frames (pure) and a paced hand-off on a real loop."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.live import Audio, Closed, CloseReason, Pacing, Session, Started, pacing
from liveplex.live.channel import LiveHandle, LiveInbox, LiveSubmission, Opened, live_channel

from .test_drive import make_info

MS = 1_000_000


@given(st.integers(0, 1000), st.integers(-100 * MS, 100 * MS), st.integers(0, 79 * MS))
def test_waves_hand_out_every_output_once_in_order_one_step_apart(n: int, wait: int, spread: int) -> None:
    waves = pacing.waves(n, wait, spread)
    ends = [end for end, _ in waves]
    assert ends == sorted(set(ends)) and (ends[-1] if ends else 0) == n  # contiguous, in order, all
    assert [delay for _, delay in waves] == [wait + k * pacing.STEP_NS for k in range(len(waves))]
    assert len(waves) <= min(n, spread // pacing.STEP_NS + 1)
    sizes = [b - a for a, b in zip([0, *ends], ends)]
    assert len(set(sizes[:-1])) <= 1 and all(s >= 1 for s in sizes)


def test_without_a_spread_a_tick_leaves_in_one_wave() -> None:
    step = pacing.STEP_NS
    assert pacing.waves(300, 5 * MS, 0) == [(300, 5 * MS)]
    assert pacing.waves(300, 0, 5 * step) == [(50 * k, (k - 1) * step) for k in range(1, 7)]
    assert pacing.waves(3, 0, 50 * step) == [(1, 0), (2, step), (3, 2 * step)]  # at most one wave per output


def test_a_tick_waits_for_due_plus_lead_or_not_at_all_once_later() -> None:
    p = Pacing(lead_ns=12 * MS)
    assert p.wait_ns(due_ns=80 * MS, now_ns=83 * MS) == 9 * MS
    assert p.wait_ns(due_ns=80 * MS, now_ns=95 * MS) == 0
    assert Pacing().wait_ns(80 * MS, 80 * MS) == 0
    with pytest.raises(ValueError, match="lead and spread must be >= 0"):
        Pacing(lead_ns=-1)


async def test_a_paced_flush_wakes_each_wave_not_before_its_time_in_join_order() -> None:
    handle, inbox = live_channel(make_info(max_sessions=40), loop=asyncio.get_running_loop())
    opened = [handle.start(Session(voice="NATF2", instructions="hi")) for _ in range(40)]
    woken: list[tuple[int, int]] = []
    for i, o in enumerate(opened):
        assert isinstance(o, Opened)
        o.output.listen(lambda i=i, o=o: (woken.append((i, time.perf_counter_ns())), o.output.drain()))
    subs = inbox.drain_nowait()
    for sub in [subs[7], subs[30]] + subs:  # two written first, as a prefill's `Started` would be
        sub.sink.send(Audio(0, bytes(3840)))
    flushed = time.perf_counter_ns()
    inbox.flush(wait_ns=10 * MS, spread_ns=3 * pacing.STEP_NS)  # 4 waves of 10, one step apart from 10 ms on
    deadline = time.monotonic() + 5
    while len(woken) < 40 and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert [i for i, _ in woken] == list(range(40))  # every session once, in join order
    slack = 1.5 * MS  # event loop timers may fire up to a clock tick early
    for i, at in woken:
        assert at - flushed >= 10 * MS + (i // 10) * pacing.STEP_NS - slack, (i, (at - flushed) / MS)
    handle.close()


def one_session(loop: asyncio.AbstractEventLoop) -> tuple[LiveHandle, LiveInbox, Opened, LiveSubmission]:
    """A channel on `loop` with one session taken: the front end's and the engine's ends of it."""
    handle, inbox = live_channel(make_info(max_sessions=1), loop=loop)
    o = handle.start(Session(voice="NATF2", instructions="hi"))
    assert isinstance(o, Opened)
    (sub,) = inbox.drain_nowait()
    return handle, inbox, o, sub


async def test_an_unpaced_flush_wakes_every_receiver_at_once() -> None:
    handle, inbox, o, sub = one_session(asyncio.get_running_loop())
    sub.sink.send(Audio(0, bytes(3840)))
    inbox.flush()
    assert await asyncio.wait_for(o.output.next(), 1) == [Audio(0, bytes(3840))]
    handle.close()


async def test_a_receiver_woken_early_does_not_take_a_paced_frame_before_its_wave() -> None:
    handle, inbox, o, sub = one_session(asyncio.get_running_loop())
    sub.sink.send(Started())
    inbox.flush()  # at once: its wake runs only after the tick below has written frame 0
    sub.sink.send(Audio(0, bytes(3840)))
    flushed = time.perf_counter_ns()
    inbox.flush(wait_ns=10 * MS)
    assert await asyncio.wait_for(o.output.next(), 1) == [Started()]
    assert await asyncio.wait_for(o.output.next(), 1) == [Audio(0, bytes(3840))]
    assert time.perf_counter_ns() - flushed >= 10 * MS - 1.5 * MS
    sub.sink.send(Closed(CloseReason.HANGUP, 1, 0, 0))
    sub.sink.drop()
    assert not o.output.ended  # the end is news only once a flush releases it
    inbox.flush()
    assert await asyncio.wait_for(o.output.next(), 1) == [Closed(CloseReason.HANGUP, 1, 0, 0)]
    assert await asyncio.wait_for(o.output.next(), 1) == [] and o.output.ended
    handle.close()
