"""`Placing`, driven directly: every retry rule of a start's way to a pod, without I/O."""

from __future__ import annotations

import orjson

from liveplex.gateway import placing
from liveplex.gateway.placing import Dial, Place, Placing, Recheck, Refuse, Start
from liveplex.gptlive import errors
from liveplex.placement import Busy, Placed

A, B = Placed("pod-a", "127.0.0.1:1"), Placed("pod-b", "127.0.0.1:2")
FULL = Busy(total_capacity=8, total_active=8, no_engines=False)
STARTED = orjson.dumps({"type": "session.started", "session": {"id": "sess_1", "expires_at": 42}}).decode()
POD_BUSY = orjson.dumps({"type": "error", "client_event_id": "s1", "error": {"code": "server_busy"}}).decode()
INVALID = orjson.dumps({"type": "error", "error": {"code": "invalid_value"}}).decode()


def test_the_first_pod_starts_the_session() -> None:
    machine = Placing(frozenset({"tripped"}))
    assert machine.begin() == Place(frozenset({"tripped"}))
    assert machine.placed(A) == Dial(A)
    assert machine.answered(A, STARTED) == Start(A, STARTED, 42, retried=False)


def test_a_full_pool_is_asked_once_more_then_refused_with_its_capacity() -> None:
    machine = Placing(frozenset())
    assert machine.placed(FULL) == Recheck(placing.BUSY_RECHECK_S)
    assert machine.rechecked() == Place(frozenset())
    refusal = machine.placed(FULL)
    assert refusal == Refuse(errors.server_busy(8), busy=FULL) and "All 8 live sessions" in refusal.error.message


def test_no_engines_is_refused_at_once_and_every_engine_excluded_says_so() -> None:
    none = Busy(0, 0, no_engines=True)
    assert Placing(frozenset()).placed(none) == Refuse(errors.no_engines(), busy=none)
    machine = Placing(frozenset({"pod-a", "pod-b"}))
    excluded = Busy(0, 0, no_engines=False)
    assert machine.placed(excluded) == Recheck(placing.BUSY_RECHECK_S)
    assert machine.placed(excluded) == Refuse(errors.no_engine_free(), busy=excluded)


def test_placement_unavailable_is_refused_with_its_own_words() -> None:
    unavailable = errors.placement_unavailable()
    command = Placing(frozenset()).placed(unavailable)
    assert isinstance(command, Refuse) and command.error is unavailable and command.busy is not None


def test_an_unreachable_pod_is_excluded_and_the_session_placed_once_more() -> None:
    machine = Placing(frozenset())
    machine.placed(A)
    assert machine.unreachable(A) == Place(frozenset({"pod-a"}))
    assert machine.placed(B) == Dial(B)
    assert machine.answered(B, STARTED) == Start(B, STARTED, 42, retried=True)


def test_two_unreachable_pods_are_server_error_and_a_full_pool_after_one_too() -> None:
    machine = Placing(frozenset())
    machine.placed(A)
    machine.unreachable(A)
    machine.placed(B)
    assert machine.unreachable(B) == Refuse(placing.NO_ENGINE_REACHED)
    other = Placing(frozenset())
    other.placed(A)
    other.unreachable(A)
    assert other.placed(FULL) == Refuse(placing.NO_ENGINE_REACHED, busy=FULL)  # no recheck after a dial


def test_a_pod_busy_by_stale_counts_is_excluded_and_its_own_answer_relayed_if_the_last() -> None:
    machine = Placing(frozenset())
    machine.placed(A)
    assert machine.answered(A, POD_BUSY) == Place(frozenset({"pod-a"}))
    machine.placed(B)
    assert machine.answered(B, POD_BUSY) == Refuse(relay=POD_BUSY, busy=Busy(0, 0, no_engines=False))
    after_full = Placing(frozenset())
    after_full.placed(A)
    after_full.answered(A, POD_BUSY)
    assert after_full.placed(FULL) == Refuse(relay=POD_BUSY, busy=Busy(0, 0, no_engines=False))


def test_any_other_answer_is_the_pods_verdict_on_the_start_relayed() -> None:
    machine = Placing(frozenset())
    machine.placed(A)
    assert machine.answered(A, INVALID) == Refuse(relay=INVALID)
    assert machine.answered(A, "not json") == Refuse(relay="not json")
