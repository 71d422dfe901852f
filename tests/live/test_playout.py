"""The adaptive caller buffer (issue 31): `Playout`'s decisions by table, and `Jitter` with a policy
driven by arrival and due times as a caller on a clean, a jittery and a stalling link would give them."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.live.buckets import Buckets
from liveplex.live.jitter import Jitter, caller_buffer
from liveplex.live.playout import MS, Adapt, Playout
from liveplex.live.pulse import WAIT_BUCKETS_S

PERIOD = 80 * MS
FRAME = 8  # samples: small frames, the same rules


def frame_bytes(n: int) -> bytes:
    """Caller frame `n`: its index in every sample, so a played frame says which one it was."""
    return struct.pack("<8h", *([n] * FRAME))


def index_of(pcm: bytes) -> int | None:
    """The caller frame a played frame was (None: silence)."""
    values = set(struct.unpack("<8h", pcm))
    assert len(values) == 1, "a played frame is one caller frame, never two halves"
    n = values.pop()
    return None if n == 0 else n


@pytest.mark.parametrize(("groups", "waits", "margin_after", "steps"), [
    # a block of 12 frames each waiting 50 ms: 46 ms above the 4 ms margin, two 20 ms steps of 4 groups
    (4, [50 * MS] * 12, 4 * MS, 2),
    # the least wait decides: one frame at 10 ms keeps the session where it is
    (4, [50 * MS] * 11 + [10 * MS], 4 * MS, 0),
    # one group: only a whole period can be given back, here 3 frames after a stall piled them up
    (1, [250 * MS] * 12, 4 * MS, 3),
    # four groups: at most 3 steps a tick (a sooner turn); the rest on the ticks that follow
    (4, [250 * MS] * 12, 4 * MS, 3),
    (1, [83 * MS] * 12, 4 * MS, 0),
    # no arrival known (a frame carried from another pod): nothing to judge
    (4, [None] * 12, 4 * MS, 0),
    # a block not yet full decides nothing
    (4, [70 * MS] * 11, 4 * MS, 0),
])
def test_a_block_of_waits_decides_the_steps_given_back(groups: int, waits: list, margin_after: int, steps: int) -> None:
    a = Adapt(Playout(PERIOD, groups, first_block_ticks=12))  # a block of the usual length (the first is shorter)
    out = [a.played(w) for w in waits]
    assert out[:-1] == [0] * (len(waits) - 1)
    assert out[-1] == steps
    assert a.margin_ns == margin_after


def test_underruns_raise_the_margin_to_its_cap_and_calm_brings_it_back() -> None:
    p = Playout(PERIOD, 4)
    a = Adapt(p)
    for expect in (14, 24, 34, 44, 54, 64, 74, 84, 94, 100, 100):
        a.underrun()
        assert a.margin_ns == expect * MS
    for _ in range(p.calm_ticks):
        a.played(None)
    assert a.margin_ns == 95 * MS
    for _ in range(20 * p.calm_ticks):
        a.played(None)
    assert a.margin_ns == p.margin_ns


def test_an_underrun_starts_over_and_the_block_of_late_frames_after_it_is_not_kept() -> None:
    a = Adapt(Playout(PERIOD, 4))
    for _ in range(11):
        a.played(90 * MS)
    a.underrun()
    steps = [a.played(60 * MS)] + [a.played(90 * MS) for _ in range(23)]
    assert a.margin_ns == 24 * MS  # the late frame came 80 - 60 = 20 ms late: 20 + 4 from now on
    assert steps[:12] == [0] * 12  # the late frames' block: judged by nothing
    assert steps[12:] == [0] * 11 + [3]  # the next: (90 - 24) // 20 = 3 steps, at most G - 1 = 3 a tick


def test_a_stall_that_missed_more_than_one_turn_adds_only_the_underrun_step() -> None:
    a = Adapt(Playout(PERIOD, 4))
    a.underrun()
    a.dry()  # a second silent turn: the frame was more than a period late
    a.played(10 * MS)
    assert a.margin_ns == 14 * MS


def test_the_least_wait_of_recent_blocks_decides_and_a_calm_block_does_not_undo_it() -> None:
    p = Playout(PERIOD, 4, first_block_ticks=12)
    a = Adapt(p)
    burst = [a.played(30 * MS if t == 5 else 90 * MS) for t in range(12)]  # one frame came late
    calm = [a.played(90 * MS) for _ in range(12)]
    assert burst[-1] == (30 - 4) // 20 and calm[-1] == 0  # the calm block still sees the late one
    for _ in range((p.history_blocks - 2) * 12):
        a.played(70 * MS)  # `history_blocks` blocks on, the late frame has aged out
    assert [a.played(70 * MS) for _ in range(12)][-1] == (70 - 4) // 20


@pytest.mark.parametrize(("field", "value"), [("groups", 3), ("groups", 0), ("margin_ns", -1),
                                              ("max_margin_ns", 1), ("calm_ticks", 0), ("block_ticks", 0)])
def test_bad_policies_name_the_field(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field.split("_")[0]):
        Playout(**{field: value})


def feed(j: Jitter, arrivals: list[tuple[int, int]], due: int) -> None:
    """Push every frame (index, arrival ns) that arrived by `due`."""
    while arrivals and arrivals[0][1] <= due:
        n, at = arrivals.pop(0)
        j.push(frame_bytes(n), at)


def run(j: Jitter, arrivals: list[tuple[int, int]], ticks: int, phase: int = 0) -> list[int | None]:
    """Tick `ticks` times at `phase + t · period`; what each tick played."""
    played = []
    for t in range(ticks):
        due = phase + t * PERIOD
        feed(j, arrivals, due)
        played.append(index_of(j.pop_pcm(due)))
    return played


def test_a_clean_link_plays_each_frame_in_the_first_tick_after_it_arrives() -> None:
    j = Jitter(FRAME, 1, 4, Playout(PERIOD, 1))
    arrivals = [(n, n * PERIOD - 30 * MS) for n in range(1, 40)]
    played = run(j, arrivals, 40)
    assert played == [None] + list(range(1, 40))
    assert j.underruns == 0 and j.dropped == 0


def test_a_session_whose_frames_wait_moves_to_an_earlier_group() -> None:
    j = Jitter(FRAME, 1, 4, Playout(PERIOD, 4))
    arrivals = [(n, n * PERIOD - 70 * MS) for n in range(1, 20)]
    earlier = []
    for t in range(14):
        feed(j, arrivals, t * PERIOD)
        j.pop_pcm(t * PERIOD)
        earlier.append(j.earlier)
    first = Playout().first_block_ticks
    assert earlier[first] == (70 - 4) // 20  # after the first, short block: 3 steps (60 ms) earlier
    assert sum(earlier) == earlier[first]


def test_a_sessions_first_block_is_short_and_the_blocks_after_it_are_whole() -> None:
    """Issue 44: a caller whose first frames land just after its group's turn waits most of a
    period until its first block is judged: 3 frames, not 12. The next block is 12 again."""
    p = Playout(PERIOD, 4, history_blocks=1)  # each block judged alone
    a = Adapt(p)
    first = [a.played(78 * MS) for _ in range(p.first_block_ticks)]
    assert first == [0] * (p.first_block_ticks - 1) + [(78 - 4) // 20]
    after = [a.played(38 * MS) for _ in range(p.block_ticks)]  # then one more step to give
    assert after == [0] * (p.block_ticks - 1) + [1]
    with pytest.raises(ValueError, match="first_block_ticks"):
        Playout(PERIOD, 4, first_block_ticks=0)


def test_a_stall_is_given_back_within_two_blocks_losing_what_it_piled_up() -> None:
    """A 300 ms stall, then the caller sends what it owes at once: the delay returns."""
    j = Jitter(FRAME, 1, 6, Playout(PERIOD, 1))
    stall = range(20, 24)  # frames 20..23 held until frame 24's time
    arrivals = [(n, (24 if n in stall else n) * PERIOD - 20 * MS) for n in range(1, 80)]
    played = run(j, arrivals, 80)
    heard = [n for n in played if n is not None]
    assert heard == sorted(heard) and len(set(heard)) == len(heard)  # in order, never twice
    assert j.underruns == 1
    lost = set(range(1, 80)) - set(heard)
    assert len(lost) <= 4
    # by two blocks after the stall every frame plays in the tick right after it arrives again
    assert played[24 + 2 * 12:] == list(range(24 + 2 * 12, 80))


def grouped(j: Jitter, arrivals: list[tuple[int, int]], periods: int) -> list[tuple[int, int | None]]:
    """Four groups ticked 20 ms apart; the session plays at its group's turn and moves where
    `earlier` and `later` say, as the sim does. (due, frame played) at each of its turns."""
    group, played = 0, []
    for t in range(periods * 4):
        if t % 4 != group:
            continue
        due = t * 20 * MS
        feed(j, arrivals, due)
        if j.later():
            group = (group + 1) % 4
            continue
        played.append((due, index_of(j.pop_pcm(due))))
        group = (group - j.earlier) % 4
    return played


def test_with_groups_a_stall_is_caught_up_by_sooner_turns_losing_nothing() -> None:
    j = Jitter(FRAME, 1, 6, Playout(PERIOD, 4))
    stall = range(20, 24)
    arrivals = [(n, (24 if n in stall else n) * PERIOD - 10 * MS) for n in range(1, 80)]
    played = grouped(j, arrivals, 80)
    heard = [n for _, n in played if n is not None]
    assert heard == list(range(1, len(heard) + 1))  # every frame, in order, none dropped
    assert j.dropped == 0 and j.underruns == 1
    gaps = [b - a for (a, _), (b, _) in zip(played, played[1:])]
    assert min(gaps) == 20 * MS  # catching up: turns a group apart
    late = {n: due for due, n in played if n is not None}
    # two blocks after the stall every frame plays within a step (plus margin) of its arrival again
    assert all(late[n] - (n * PERIOD - 10 * MS) <= 30 * MS for n in range(24 + 24, 75))


def test_a_late_frame_takes_a_later_turn_up_to_g_minus_one_steps_then_underruns() -> None:
    adapt = Adapt(Playout(PERIOD, 4))
    assert [adapt.later() for _ in range(4)] == [True, True, True, False]
    assert adapt.underrun() == 3  # waited in vain: back to the turn it waited from
    assert adapt.underrun() == 0
    adapt.played(30 * MS)  # the frame came: the next one may wait again
    assert adapt.later() and adapt.deferred == 4
    assert not Adapt(Playout(PERIOD, 1)).later()  # one group: no later turn, an underrun


def test_with_groups_a_burst_hold_moves_the_session_later_and_nothing_is_silent() -> None:
    """A 50 ms hold (burst50's), then what is owed at once: the held frame waits for a later group
    instead of the model hearing silence; the session keeps the later phase while holds recur."""
    j = Jitter(FRAME, 1, 6, Playout(PERIOD, 4))
    held = {10, 25, 40}  # each arrives 50 ms after its time
    arrivals = [(n, n * PERIOD - 10 * MS + (50 * MS if n in held else 0)) for n in range(1, 60)]
    played = grouped(j, arrivals, 60)
    heard = [n for _, n in played if n is not None]
    assert heard == list(range(1, len(heard) + 1)) and len(heard) >= 55
    assert j.underruns == 0 and j.dropped == 0
    assert played[0][1] is None and all(n is not None for _, n in played[1:])  # never silent once playing
    assert j.adapt is not None and j.adapt.deferred == 2  # 40 ms late past the 10 ms it waited: two steps
    due = {n: d for d, n in played}
    assert due[11] - due[10] == 80 * MS and due[10] - due[9] == 120 * MS  # one turn two steps later


def test_a_frame_late_for_its_tick_costs_one_underrun_and_the_margin_grows() -> None:
    j = Jitter(FRAME, 1, 4, Playout(PERIOD, 1))
    arrivals = [(n, n * PERIOD - (0 if n == 5 else 2) * MS + (3 * MS if n == 5 else 0)) for n in range(1, 12)]
    played = run(j, arrivals, 12)
    assert played[:6] == [None, 1, 2, 3, 4, None]
    assert j.underruns == 1 and j.adapt is not None and j.adapt.margin_ns == 14 * MS  # 4 + 10: more than 3 ms late + 4
    assert [n for n in played if n] == list(range(1, 11))


def test_both_buffers_observe_each_played_frames_wait_when_given_a_meter() -> None:
    """The pod's `caller_wait` (issue 31's budget): from the arrival of a frame's last byte to its
    tick's due time, for the fixed buffer as for the adaptive one; frames of unknown arrival are not counted."""
    for prebuffer in (0, 2):
        waits = Buckets(WAIT_BUCKETS_S)
        j = caller_buffer(FRAME, prebuffer, 4, PERIOD, 1, waits)
        arrivals = [(n, n * PERIOD - 30 * MS) for n in range(1, 11)]
        played = run(j, arrivals, 11)
        heard = [n for n in played if n is not None]
        assert sum(waits.counts) == len(heard) > 0
        expected = 30 if prebuffer == 0 else 110  # a fixed prebuffer of 2 holds each frame a period longer
        assert abs(waits.total - len(heard) * expected / 1000) < 1e-9
    j = Jitter(FRAME, 1, 4, None, Buckets(WAIT_BUCKETS_S))
    j.push(frame_bytes(1))  # no arrival time: nothing to observe
    j.pop_pcm(PERIOD)
    assert j.waits is not None and sum(j.waits.counts) == 0


def test_the_fixed_buffer_is_what_it_was() -> None:
    fixed = caller_buffer(FRAME, 2, 4, PERIOD, 4)
    assert fixed.adapt is None and fixed.prebuffer == 2
    adaptive = caller_buffer(FRAME, 0, 4, PERIOD, 4)
    assert adaptive.adapt is not None and adaptive.prebuffer == 1 and adaptive.adapt.policy.groups == 4


def test_the_cap_drops_whole_frames_so_the_stream_stays_on_its_grid() -> None:
    j = Jitter(FRAME, 1, 2, Playout(PERIOD, 1))
    j.push(frame_bytes(1) + frame_bytes(2) + frame_bytes(3)[:6], 0)
    assert j.dropped == FRAME
    assert index_of(j.pop_pcm(PERIOD)) == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=10, max_size=120))
def test_with_groups_any_arrivals_play_in_order_never_twice_and_silence_only_past_g_minus_one_steps(
        lateness_ms: list[int]) -> None:
    """Moving earlier and later between four groups, frames play in order, at most once, and a
    playing session hears silence only when a frame was later than three steps could wait for."""
    arrivals, last = [], 0
    for n, late in enumerate(lateness_ms, start=1):
        last = max(last, n * PERIOD + late * MS)
        arrivals.append((n, last))
    j = Jitter(FRAME, 1, 4, Playout(PERIOD, 4))
    played = grouped(j, list(arrivals), len(lateness_ms) + 12)
    heard = [n for _, n in played if n is not None]
    assert heard == sorted(set(heard))
    assert j.underruns <= sum(1 for a, b in zip(lateness_ms, lateness_ms[1:]) if b - a > 60 - 20) + 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=10, max_size=120), st.sampled_from([1, 2, 4]),
       st.integers(0, 79))
def test_any_arrivals_play_in_order_never_twice_within_the_cap(lateness_ms: list[int], groups: int,
                                                               phase_ms: int) -> None:
    """Frames arriving `lateness` ms after their time (in order): each played at most once, in
    order, the buffer never past its cap, and a frame never played more than the cap's frames after
    it arrived (delay bounded)."""
    cap = 4
    j = Jitter(FRAME, 1, cap, Playout(PERIOD, groups))
    arrivals, last = [], 0
    for n, late in enumerate(lateness_ms, start=1):
        last = max(last, n * PERIOD + late * MS)
        arrivals.append((n, last))
    arrived_at = dict(arrivals)
    heard: list[int] = []
    for t in range(len(lateness_ms) + 12):
        due = phase_ms * MS + t * PERIOD
        feed(j, arrivals, due)
        n = index_of(j.pop_pcm(due))
        assert len(j) <= FRAME * cap
        if n is not None:
            assert due - arrived_at[n] <= cap * PERIOD
            heard.append(n)
    assert heard == sorted(set(heard))
