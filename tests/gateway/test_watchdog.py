"""The gateway's `Watchdog`, driven directly: time is an argument."""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.gateway.watchdog import Watchdog

MS = 1_000_000


@dataclass(eq=False)
class Leg:
    received: int | None = 0


def test_a_session_is_silent_after_the_deadline_without_a_message_and_not_before() -> None:
    dog, leg = Watchdog(1000 * MS), Leg()
    assert dog.period_ns == 250 * MS
    assert dog.check([leg], 0, 0) == []
    assert dog.check([leg], 999 * MS, 0) == []
    assert dog.check([leg], 1000 * MS, 0) == [leg]


def test_each_message_restarts_the_clock_and_unwatched_sessions_are_skipped() -> None:
    dog, talking, starting = Watchdog(1000 * MS), Leg(), Leg(received=None)
    for t in range(0, 5000, 250):
        talking.received += 1
        assert dog.check([talking, starting], t * MS, 0) == []
    assert dog.check([talking, starting], 6000 * MS, 0) == [talking]


def test_a_late_round_passes_no_verdict_the_stall_was_the_gateways() -> None:
    dog, leg = Watchdog(1000 * MS), Leg()
    dog.check([leg], 0, 0)
    assert dog.check([leg], 1500 * MS, late_ns=1250 * MS) == []  # the loop was blocked 1.25 s
    assert dog.check([leg], 2000 * MS, 0) == []
    assert dog.check([leg], 2500 * MS, 0) == [leg]


def test_sessions_not_passed_are_forgotten() -> None:
    dog, leg = Watchdog(1000 * MS), Leg()
    dog.check([leg], 0, 0)
    dog.check([], 500 * MS, 0)
    assert dog.check([leg], 1200 * MS, 0) == []  # its clock restarted when it came back
