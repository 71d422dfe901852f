"""The sim's tick groups (issue 31): a session joins the group ticked next and moves to the group
whose phase fits its caller's arrivals, losing and repeating nothing."""

from __future__ import annotations

import time

from liveplex.continuity import blob
from liveplex.live import Audio, Session, by_hand, groups
from liveplex.live.channel import Opened
from liveplex.live.drive import Pending
from liveplex.live.pulse import Pulse
from liveplex.sim_pod import SimEngine, SimProfile
from liveplex.sim_pod.handover import NEXT_DUE

MS = 1_000_000
PROFILE = SimProfile(echo_frames=0, tick_groups=4)


def test_a_session_moves_to_the_group_its_frames_fit_and_hears_every_frame_once() -> None:
    handle, inbox = by_hand.live_channel(PROFILE.info())
    engine = SimEngine(PROFILE)
    for g in range(3):  # groups 0-2 tick empty: the newcomer joins group 3, ticked next
        engine.tick(0, g, None)
    opened = handle.start(Session("NATF2", "x"))
    assert isinstance(opened, Opened)
    for sub in inbox.drain_nowait():
        engine.take(sub)  # type: ignore[arg-type]
    assert engine.sessions() == 1 and not any(engine._groups)  # it joins at the next turn
    heard: list[int] = []
    for period in range(30):
        opened.audio.send(bytes([period + 1]) * 3840)  # frame `period`, stamped as it arrives
        sent = time.perf_counter_ns()
        for g in range(3 if period == 0 else 0, 4):  # group g's tick is due 10 + 20 g ms after the frame arrived
            engine.tick(0, g, sent + (10 + 20 * g) * MS)
            if period == 0:
                assert [len(calls) for calls in engine._groups] == [0, 0, 0, 1]  # joined group 3's turn
        heard += [o.pcm[0] - 1 for o in opened.output.drain() if isinstance(o, Audio)]
    assert [len(calls) for calls in engine._groups] == [1, 0, 0, 0]  # 70 ms waits: three steps earlier
    assert heard[:29] == list(range(29))  # in order, none lost, none twice


def test_a_moved_session_leaves_after_its_own_turn_and_arrives_on_its_cadence() -> None:
    """Exported right after its group's tick, with the wall-clock time its next frame is due;
    the importing sim holds it until the turn nearest that time, whatever group that is."""
    handle, inbox = by_hand.live_channel(PROFILE.info())
    old = SimEngine(PROFILE)
    opened = handle.start(Session("NATF2", "x"))
    assert isinstance(opened, Opened)
    for sub in inbox.drain_nowait():
        old.take(sub)  # type: ignore[arg-type]
    base = time.perf_counter_ns() - 100 * MS  # its next frame is due 60 ms from now
    old.tick(0, 0, base)  # the session's group, 0
    old.tick(0, 1, base + 20 * MS)
    assert old.export(opened.id) is Pending.NEXT_TICK  # group 1 just ran: not its turn
    for g in (2, 3):
        old.tick(0, g, base + (20 + 20 * g) * MS)
    old.tick(0, 0, base + 80 * MS)
    data = old.export(opened.id)
    assert isinstance(data, bytes) and old.sessions() == 0
    due_unix = blob.decode(data).header.state[NEXT_DUE]  # type: ignore[union-attr]
    assert abs(due_unix - (base + 160 * MS + time.time_ns() - time.perf_counter_ns())) < 5 * MS

    handle2, inbox2 = by_hand.live_channel(PROFILE.info())
    new = SimEngine(PROFILE)
    moved = handle2.resume(Session("NATF2", "x"), data)
    assert isinstance(moved, Opened)
    for sub in inbox2.drain_nowait():
        new.take(sub)  # type: ignore[arg-type]
    assert new.sessions() == 1
    # this pod's groups are due 5 ms into each 20 ms step after `base`: group 0 at +165 ms is nearest +160
    turns = [(g, base + (85 + 20 * g) * MS) for g in range(4)] + [(0, base + 165 * MS)]
    ran = []
    for g, due in turns:
        new.tick(0, g, due)
        ran.append(any(isinstance(o, Audio) for o in moved.output.drain()))
    assert ran == [False, False, False, False, True]


def test_auto_runs_the_groups_the_modeled_tick_fits_and_regroups_losing_nothing() -> None:
    """`tick_groups` 0: PersonaPlex's rule on the modeled costs (18 ms + 2 ms a row: 4 groups up to
    4 sessions, 2 from 5). Sessions arriving and leaving change G; every caller frame is heard once,
    in order, across the changes."""
    profile = SimProfile(echo_frames=0, tick_groups=0, tick_base_us=18_000, tick_per_session_us=2_000)
    assert profile.info().tick_groups == 4
    handle, inbox = by_hand.live_channel(profile.info())
    pulse = Pulse()
    engine = SimEngine(profile, pulse)
    calls: list[Opened] = []
    heard: dict[int, list[int]] = {}
    seen_groups = []
    for period in range(40):
        if period in (1, 3, 5, 7, 9):  # five callers: from the fifth only two groups fit
            opened = handle.start(Session("NATF2", "x"))
            assert isinstance(opened, Opened)
            calls.append(opened)
            for sub in inbox.drain_nowait():
                engine.take(sub)  # type: ignore[arg-type]
        if period == 12:
            calls[0].audio.close()  # back to four: four groups again, after `UP_PERIODS` calm periods
        for c in calls:
            if not c.audio.closed:
                c.audio.send(bytes([period % 250 + 1]) * 3840)
        now = time.perf_counter_ns()
        for sub in range(4):
            if groups.turn(sub, pulse.tick_groups, 4) is not None:  # as `drive` passes over the rest
                engine.tick(0, sub, now + (5 + 20 * sub) * MS)
        seen_groups.append(pulse.tick_groups)
        for c in calls:
            heard.setdefault(c.id, []).extend(o.pcm[0] - 1 for o in c.output.drain() if isinstance(o, Audio))
    assert seen_groups[:9] == [4] * 9 and seen_groups[9:13] == [2] * 4
    assert seen_groups[-1] == 4 and pulse.regroups == 2 and "fits" in pulse.groups_reason
    for c, start in zip(calls[1:], (3, 5, 7, 9), strict=True):
        frames_heard = heard[c.id]  # silence would read -1
        assert frames_heard == list(range(start, start + len(frames_heard)))  # in order, none lost or twice, no silence
        assert len(frames_heard) >= 40 - start - 3
