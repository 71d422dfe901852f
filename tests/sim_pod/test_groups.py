"""The sim's tick groups (issue 31): a session joins the group ticked next and moves to the group
whose phase fits its caller's arrivals, losing and repeating nothing."""

from __future__ import annotations

import time

from liveplex.live import Audio, Session, by_hand
from liveplex.live.channel import Opened
from liveplex.sim_pod import SimEngine, SimProfile

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
    assert [len(calls) for calls in engine._groups] == [0, 0, 0, 1]
    heard: list[int] = []
    for period in range(30):
        opened.audio.send(bytes([period + 1]) * 3840)  # frame `period`, stamped as it arrives
        sent = time.perf_counter_ns()
        for g in range(4):  # group g's tick is due 10 + 20 g ms after the frame arrived
            engine.tick(0, g, sent + (10 + 20 * g) * MS)
        heard += [o.pcm[0] - 1 for o in opened.output.drain() if isinstance(o, Audio)]
    assert [len(calls) for calls in engine._groups] == [1, 0, 0, 0]  # 70 ms waits: three steps earlier
    assert heard[:29] == list(range(29))  # in order, none lost, none twice
