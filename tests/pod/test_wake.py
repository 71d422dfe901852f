"""The wake machine fed frames by hand: its table row by row, the idle count, the pre-roll ring, a
refused wake, and the admission rule that keeps slots for wakes (issue 43, docs/pause.md)."""

from __future__ import annotations

import pytest

from liveplex.gptlive.events import MAX_IDLE_TIMEOUT_S, wake_bounds
from liveplex.pod import wake as w

QUIET, LOUD = 0.1, 0.9


def frame(i: int) -> bytes:
    return bytes([i % 256]) * 4


# --- the table, row by row --------------------------------------------------------------------------

@pytest.mark.parametrize(("phase", "heard", "after", "do"), [
    (w.Phase.ACTIVE, w.Heard.QUIET, w.Phase.ACTIVE, w.Do.FEED),
    (w.Phase.ACTIVE, w.Heard.SPEECH, w.Phase.ACTIVE, w.Do.FEED),
    (w.Phase.ACTIVE, w.Heard.IDLE, w.Phase.PAUSED, w.Do.PAUSE),
    (w.Phase.PAUSED, w.Heard.QUIET, w.Phase.PAUSED, w.Do.KEEP),
    (w.Phase.PAUSED, w.Heard.SPEECH, w.Phase.ACTIVE, w.Do.WAKE),
    (w.Phase.PAUSED, w.Heard.STAYED, w.Phase.ACTIVE, w.Do.FLUSH),
    (w.Phase.WAITING, w.Heard.QUIET, w.Phase.WAITING, w.Do.KEEP),
    (w.Phase.WAITING, w.Heard.SPEECH, w.Phase.ACTIVE, w.Do.WAKE),
    (w.Phase.ACTIVE, w.Heard.REFUSED, w.Phase.PAUSED, w.Do.NOTHING),
])
def test_table_rows(phase: w.Phase, heard: w.Heard, after: w.Phase, do: w.Do) -> None:
    assert w.TABLE[(phase, heard)] == (after, do)


@pytest.mark.parametrize(("phase", "heard"), [
    (w.Phase.WAITING, w.Heard.STAYED), (w.Phase.ACTIVE, w.Heard.STAYED),
    (w.Phase.PAUSED, w.Heard.REFUSED), (w.Phase.WAITING, w.Heard.REFUSED),
])
def test_late_answers_do_nothing(phase: w.Phase, heard: w.Heard) -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1, wait_first=phase is w.Phase.WAITING))
    m.phase = phase
    assert m._step(heard, b"") is None
    assert m.phase is phase


# --- a session's life -------------------------------------------------------------------------------

def test_quiet_for_the_timeout_pauses_on_the_last_frame() -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1))  # 13 frames of 80 ms
    assert m.policy.idle_frames == 13
    for i in range(12):
        assert m.frame(frame(i), QUIET, False) == w.Feed((frame(i),))
    assert m.frame(frame(12), QUIET, False) == w.Pause()
    assert m.phase is w.Phase.PAUSED


@pytest.mark.parametrize("by", ["caller", "model"])
def test_speech_restarts_the_idle_count(by: str) -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1))
    for i in range(12):
        m.frame(frame(i), QUIET, False)
    m.frame(frame(12), LOUD if by == "caller" else QUIET, by == "model")
    for i in range(12):
        assert isinstance(m.frame(frame(i), QUIET, False), w.Feed)
    assert m.frame(frame(0), QUIET, False) == w.Pause()


def test_the_threshold_is_inclusive() -> None:
    m = w.Machine(w.Policy(vad_threshold=0.6, idle_timeout_s=1, wait_first=True))
    assert m.frame(frame(0), 0.59, False) is None
    assert m.frame(frame(1), 0.6, False) == w.Wake((frame(0), frame(1)))


def test_wake_feeds_the_last_frames_the_waking_one_last() -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1))
    for i in range(13):
        m.frame(frame(i), QUIET, False)
    for i in range(100, 110):
        assert m.frame(frame(i), QUIET, False) is None
    assert m.frame(frame(110), LOUD, False) == w.Wake((frame(108), frame(109), frame(110)))
    assert m.phase is w.Phase.ACTIVE
    assert m.frame(frame(111), QUIET, False) == w.Feed((frame(111),))


def test_a_pause_that_did_not_happen_feeds_what_was_kept() -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1))
    for i in range(13):
        m.frame(frame(i), QUIET, False)
    m.frame(frame(13), QUIET, False)
    assert m.stayed() == w.Feed((frame(12), frame(13)))  # the pausing frame and the one after
    assert m.phase is w.Phase.ACTIVE
    for i in range(12):  # the idle count starts over
        assert isinstance(m.frame(frame(i), QUIET, False), w.Feed)


def test_a_refused_wake_is_tried_again_at_the_next_speech() -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1))
    for i in range(13):
        m.frame(frame(i), QUIET, False)
    assert isinstance(m.frame(frame(20), LOUD, False), w.Wake)
    assert m.refused() is None
    assert m.phase is w.Phase.PAUSED
    assert m.frame(frame(21), QUIET, False) is None
    assert m.frame(frame(22), LOUD, False) == w.Wake((frame(21), frame(22)))


def test_without_a_timeout_an_active_session_never_pauses() -> None:
    m = w.Machine(w.Policy(wait_first=True))
    assert m.frame(frame(0), LOUD, False) == w.Wake((frame(0),))
    for i in range(1000):
        assert isinstance(m.frame(frame(i), 0.0, False), w.Feed)


def test_waiting_starts_without_a_pause() -> None:
    m = w.Machine(w.Policy(idle_timeout_s=1, wait_first=True))
    assert m.phase is w.Phase.WAITING
    assert all(m.frame(frame(i), QUIET, False) is None for i in range(50))


# --- the policy's values ----------------------------------------------------------------------------

@pytest.mark.parametrize(("threshold", "timeout", "param"), [
    (0.5, 3, None), (0.0, 1, None), (1.0, MAX_IDLE_TIMEOUT_S, None), (0.5, None, None),
    (-0.01, 3, "vad_threshold"), (1.01, 3, "vad_threshold"), (float("nan"), 3, "vad_threshold"),
    (0.5, 0, "idle_timeout_s"), (0.5, MAX_IDLE_TIMEOUT_S + 1, "idle_timeout_s"),
])
def test_bounds(threshold: float, timeout: int | None, param: str | None) -> None:
    found = wake_bounds(threshold, timeout)
    assert (found and found[0]) == param


@pytest.mark.parametrize(("seconds", "frames"), [(1, 13), (3, 38), (5, 63), (60, 750)])
def test_idle_frames_round_up(seconds: int, frames: int) -> None:
    assert w.Policy(idle_timeout_s=seconds).idle_frames == frames


# --- admission: slots kept for wakes ----------------------------------------------------------------

@pytest.mark.parametrize(("slots", "active", "paused", "reserve", "max_paused", "free"), [
    (8, 0, 0, 2, 32, 8),      # nothing paused: every slot
    (8, 4, 4, 2, 32, 2),      # two of the four paused keep a slot
    (8, 6, 1, 2, 32, 1),      # one paused keeps one
    (8, 6, 10, 2, 32, 0),     # the reserve is full
    (8, 2, 34, 2, 32, 0),     # the host budget is full
    (8, 2, 20, 2, 32, 4),     # ... not yet
    (8, 8, 0, 2, 32, 0),
    (8, 0, 3, 8, 0, 5),       # no host budget: the slots bound all sessions
])
def test_free_slots(slots: int, active: int, paused: int, reserve: int, max_paused: int, free: int) -> None:
    assert w.free_slots(slots, active, paused, reserve, max_paused) == free


@pytest.mark.parametrize(("max_paused", "budget", "park", "most"), [
    (256, 0, 1000, 256),      # no byte budget: the count alone
    (256, 10_000, 0, 256),    # no park yet: its size is not known
    (256, 10_000, 3000, 3),   # the budget holds three parks
    (2, 10_000, 3000, 2),     # ... the count is lower
    (256, 2999, 3000, 0),     # not one
])
def test_most_paused(max_paused: int, budget: int, park: int, most: int) -> None:
    assert w.most_paused(max_paused, budget, park) == most


@pytest.mark.parametrize(("paused", "leaving", "parked", "park", "max_paused", "budget", "may"), [
    (0, 0, 0, 0, 256, 0, True),
    (2, 0, 6000, 3000, 256, 0, True),        # no byte budget
    (2, 0, 6000, 3000, 256, 9000, True),     # the third park fits exactly
    (3, 0, 9000, 3000, 256, 9000, False),    # the fourth does not
    (2, 1, 6000, 3000, 256, 9000, False),    # ... nor a fourth while a third leaves
    (1, 0, 3000, 3000, 1, 0, False),         # the count is full
    (0, 1, 0, 0, 1, 0, False),               # ... with the one leaving
    (0, 0, 0, 0, 256, 1, True),              # a park's size not known yet: the first teaches it
    (0, 1, 0, 0, 256, 1, False),             # ... alone
])
def test_may_pause(paused: int, leaving: int, parked: int, park: int, max_paused: int, budget: int,
                   may: bool) -> None:
    assert w.may_pause(paused, leaving, parked, park, max_paused, budget) is may


def test_a_pod_admits_no_more_than_its_host_budget_can_pause() -> None:
    """Admit while `free_slots` says so, and pause whatever `may_pause` lets out of the batch: the
    parked bytes never pass the budget, and every admitted session either pauses or holds a slot."""
    slots, reserve, park, budget = 4, 2, 3000, 10_000
    active = paused = 0
    for _ in range(50):
        most = w.most_paused(256, budget, park)
        if w.free_slots(slots, active, paused, reserve, most) > 0:
            active += 1
        if active and w.may_pause(paused, 0, paused * park, park, 256, budget):
            active, paused = active - 1, paused + 1
        assert paused * park <= budget and active <= slots
    assert (active, paused) == (1, 3)  # the budget's three parks; past them the slots bound all sessions


def test_with_a_reserve_as_large_as_the_paused_every_wake_finds_a_slot() -> None:
    """Admit while a slot is free, then pause and wake in any order: active never passes slots."""
    slots, reserve = 4, 100
    active = paused = 0
    for step in range(200):
        if w.free_slots(slots, active, paused, reserve, 100) > 0:
            active += 1
        elif step % 3 and active:
            active, paused = active - 1, paused + 1
        elif paused:
            active, paused = active + 1, paused - 1
        assert active <= slots


def test_a_talking_caller_is_measured_once_in_six_frames_and_an_unmeasured_frame_is_speech() -> None:
    """The hangover: after a speech frame the next `HANGOVER_FRAMES` go unmeasured (speech), so a
    caller who keeps talking costs one detector call in six; quiet measured frames end it, and the
    idle count then runs from the last unmeasured frame. Paused, every frame is measured."""
    m = w.Machine(w.Policy(idle_timeout_s=1))  # 13 frames
    measured = []
    for i in range(24):
        measured.append(m.measures(False))
        m.frame(frame(i), LOUD if measured[-1] else None, False)
    assert measured == [True, False, False, False, False, False] * 4
    assert not m.measures(True)  # the model spoke: speech anyway
    assert m.measures(False)
    for i in range(12):
        assert m.frame(frame(i), QUIET, False) == w.Feed((frame(i),))
        assert m.measures(False)  # quiet: every frame measured again
    assert m.frame(frame(12), QUIET, False) == w.Pause()
    assert m.measures(False)  # paused: every caller frame measured (a wake)
