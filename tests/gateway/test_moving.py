"""`Moving`, driven directly: every rule of a relayed session's move off a draining pod, without I/O."""

from __future__ import annotations

import orjson

from liveplex.gateway import moving, placing
from liveplex.gateway.moving import Arrived, DialTarget, Export, Import, Moving, Phase, Stayed, Stranded, Wait
from liveplex.gateway.placing import Place, Recheck
from liveplex.gptlive import errors
from liveplex.placement import Busy, Placed

OLD, A, B = "pod-old", Placed("pod-a", "127.0.0.1:1"), Placed("pod-b", "127.0.0.1:2")
FULL = Busy(total_capacity=8, total_active=8, no_engines=False)
STARTED = orjson.dumps({"type": "session.started", "session": {"id": "sess_1"}}).decode()
POD_BUSY = orjson.dumps({"type": "error", "error": {"code": "server_busy"}}).decode()
BLOB = b"\x00blob"


def test_a_move_places_first_then_exports_imports_and_dials_once_the_old_socket_closed() -> None:
    machine = Moving(OLD, frozenset({"tripped"}))
    assert machine.begin() == Place(frozenset({OLD, "tripped"}))  # never back onto the draining pod
    assert not machine.holding and not machine.copying
    assert machine.placed(A) == Export()
    assert machine.copying and not machine.holding  # the old pod reads them until it lets go, and says how many
    assert machine.exported(BLOB) == Import(A, BLOB)
    assert machine.holding and not machine.copying  # from the blob on, the client's frames wait for the target
    assert machine.imported(A, "imp_1") == Wait()  # the old pod's last frames are still on their way
    assert machine.old_closed(handed_over=True) == DialTarget(A, "imp_1")
    assert machine.answered(A, STARTED) == Arrived(A)
    assert machine.phase is Phase.DONE and not machine.holding


def test_the_old_socket_may_close_before_the_blob_arrives() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    machine.placed(A)
    assert machine.old_closed(handed_over=True) == Wait()
    assert machine.exported(BLOB) == Import(A, BLOB)
    assert machine.imported(A, "imp_1") == DialTarget(A, "imp_1")


def test_with_no_room_anywhere_the_session_stays_where_it_is() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    assert machine.placed(FULL) == Recheck(placing.BUSY_RECHECK_S)
    assert machine.rechecked() == Place(frozenset({OLD}))
    assert machine.placed(FULL) == Stayed()
    assert machine.placed(A) == Wait()  # done: a late placement is the shell's to give back


def test_an_export_the_old_pod_refuses_leaves_the_session_and_gives_the_target_slot_back() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    machine.placed(A)
    assert machine.exported(None) == Stayed(unreserve=A)
    assert machine.phase is Phase.DONE and not machine.holding and not machine.copying


def test_a_refused_import_offers_the_blob_to_one_more_pod_then_the_session_is_lost() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    machine.placed(A)
    machine.exported(BLOB)
    machine.old_closed(handed_over=True)
    assert machine.imported(A, None) == Place(frozenset({OLD, "pod-a"}))
    assert machine.holding  # still held: the session exists only as the blob
    assert machine.placed(B) == Import(B, BLOB)
    assert machine.imported(B, None) == Stranded(moving.NO_POD_TOOK_IT)


def test_an_unreachable_or_busy_target_is_excluded_and_the_next_one_continues_the_session() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    machine.placed(A)
    machine.exported(BLOB)
    machine.old_closed(handed_over=True)
    assert machine.imported(A, "imp_1") == DialTarget(A, "imp_1")
    assert machine.unreachable(A) == Place(frozenset({OLD, "pod-a"}))
    assert machine.placed(B) == Import(B, BLOB)
    assert machine.imported(B, "imp_2") == DialTarget(B, "imp_2")
    assert machine.answered(B, STARTED) == Arrived(B)

    busy = Moving(OLD, frozenset())
    busy.begin()
    busy.placed(A)
    busy.exported(BLOB)
    busy.old_closed(handed_over=True)
    busy.imported(A, "imp_1")
    assert busy.answered(A, POD_BUSY) == Place(frozenset({OLD, "pod-a"}))
    assert busy.placed(FULL) == Stranded(moving.NO_POD_TOOK_IT)


def test_the_old_pod_dying_before_its_export_loses_the_session_and_frees_the_target() -> None:
    placing_ = Moving(OLD, frozenset())
    placing_.begin()
    assert placing_.old_closed(handed_over=False) == Stranded(None)
    exporting = Moving(OLD, frozenset())
    exporting.begin()
    exporting.placed(A)
    assert exporting.old_closed(handed_over=False) == Stranded(None, unreserve=A)
    assert exporting.exported(BLOB) == Wait()


def test_a_hand_over_nobody_asked_for_is_a_loss_and_placement_errors_are_no_move() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    assert machine.old_closed(handed_over=True) == Stranded(None)
    unavailable = Moving(OLD, frozenset())
    unavailable.begin()
    assert unavailable.placed(errors.placement_unavailable()) == Stayed()


def test_inputs_out_of_turn_change_nothing() -> None:
    machine = Moving(OLD, frozenset())
    machine.begin()
    assert machine.exported(BLOB) == Wait()
    assert machine.imported(A, "imp_1") == Wait()
    assert machine.answered(A, STARTED) == Wait()
    assert machine.unreachable(A) == Wait()
    assert machine.phase is Phase.PLACING


def test_a_resume_offers_the_kept_record_with_no_export_and_holds_the_callers_frames_throughout() -> None:
    machine = Moving(OLD, frozenset(), record=BLOB)
    assert machine.resuming and machine.holding  # the pod is gone: nothing goes anywhere until a pod takes it
    assert machine.begin() == Place(frozenset({OLD}))
    assert machine.placed(A) == Import(A, BLOB)  # the record, to the resume route
    assert machine.imported(A, "imp_1") == DialTarget(A, "imp_1")  # no old socket to wait for
    assert machine.answered(A, STARTED) == Arrived(A)
    assert not machine.holding


def test_a_resume_no_pod_takes_is_lost_and_one_with_no_room_at_all_too() -> None:
    refused = Moving(OLD, frozenset(), record=BLOB)
    refused.begin()
    refused.placed(A)
    assert refused.imported(A, None) == Place(frozenset({OLD, "pod-a"}))
    refused.placed(B)
    assert refused.imported(B, None) == Stranded(moving.NO_POD_TOOK_IT)
    full = Moving(OLD, frozenset(), record=BLOB)
    full.begin()
    full.placed(FULL)
    assert full.rechecked() == Place(frozenset({OLD}))
    assert full.placed(FULL) == Stranded(moving.NO_POD_TOOK_IT)
