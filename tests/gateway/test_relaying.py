"""`Relaying`, driven directly: what a relayed session's frames and its pod's end mean, without I/O."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.gateway import moving, placing, relaying, upstream
from liveplex.gateway.moving import DialTarget, Export, Import
from liveplex.gateway.placing import Place, Recheck
from liveplex.gateway.relaying import (
    FORWARD,
    NOTHING,
    RELAY_FRAME,
    Abort,
    Blame,
    EndClient,
    Forget,
    Forward,
    Lose,
    Moved,
    RelayEvent,
    Relaying,
    Resuming,
    StartMove,
    Switch,
    Unreserve,
)
from liveplex.gptlive import connection, events
from liveplex.gptlive.served import Served
from liveplex.gptlive.server import hop
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.voices import BUILTIN, Voices
from liveplex.live import contract
from liveplex.placement import Busy, Placed
from liveplex.sim_pod.profile import SimProfile
from tests.support.clients import STARTS

E = upstream.Ending
OLD, A, B = Placed("pod-old", "127.0.0.1:1"), Placed("pod-a", "127.0.0.1:2"), Placed("pod-b", "127.0.0.1:3")
TRIPPED = frozenset({"pod-tripped"})
FULL = Busy(total_capacity=8, total_active=8, no_engines=False)
AUDIO = events.AUDIO_DELTA_PREFIX + "AAAA" + '"}'
CLOSED = orjson.dumps({"type": "session.closed", "reason": "client_requested"}).decode()
STARTED = orjson.dumps({"type": "session.started", "session": {"id": "sess_1"}}).decode()
REC = b"\x01\x02\x03\x04"
BLOB = b"\x00blob"
FRAMES = 2
"""Audio frames every state below has relayed (the session's usage in `Lose` and `EndClient`)."""


checkpoint = hop.checkpoint_event
"""A pod's checkpoint event."""


def lost(ending: upstream.Ending) -> Lose:
    return Lose(relaying.LOST_BECAUSE[ending], ending.value)


def resumed_after(ending: upstream.Ending) -> tuple[object, ...]:
    """A running session's pod failed with `ending` and the session had a record: resume."""
    return (Blame(OLD.pod), Resuming(OLD.pod, ending, len(REC)), Place(TRIPPED | {OLD.pod}))


# --- the states a session can be in when its pod's socket ends ------------------------------------------

def running(record: bytes = b"") -> Relaying:
    machine = Relaying(OLD)
    for _ in range(FRAMES):
        assert machine.upstream_message(AUDIO) is RELAY_FRAME
    if record:
        assert machine.upstream_message(checkpoint(record)) is NOTHING
    return machine


def recorded() -> Relaying:
    return running(REC)


def closing() -> Relaying:
    machine = running(REC)
    assert machine.upstream_message(CLOSED) == (RelayEvent(CLOSED),)
    return machine


def move_placing(record: bytes = b"") -> Relaying:
    machine = running(record)
    assert machine.upstream_message(hop.MOVE_REQUEST) == (StartMove(),)
    assert machine.move(TRIPPED) == (Place(TRIPPED | {OLD.pod}),)
    return machine


def move_exporting(record: bytes = b"") -> Relaying:
    machine = move_placing(record)
    assert machine.moving is not None
    assert machine.placed(machine.moving, A) == (Export(),)
    return machine


def move_exporting_recorded() -> Relaying:
    return move_exporting(REC)


def move_placing_recorded() -> Relaying:
    return move_placing(REC)


def move_exporting_closing() -> Relaying:
    machine = move_exporting()
    machine.upstream_message(CLOSED)
    return machine


def move_importing() -> Relaying:
    machine = move_exporting()
    assert machine.moving is not None
    assert machine.exported(machine.moving, BLOB, 0, 0) == (Import(A, BLOB),)
    return machine


def resuming() -> Relaying:
    machine = recorded()
    machine.upstream_gone(E.LOST, None, TRIPPED)
    return machine


def ended() -> Relaying:
    machine = running(REC)
    machine.end()
    return machine


GONE: list[tuple[Callable[[], Relaying], upstream.Ending | None, int | None, tuple[object, ...]]] = [
    # no record: the session is lost; the breaker trips only for the pod's own faults
    (running, E.CLOSED, 1000, (Blame(OLD.pod), lost(E.VIOLATION))),  # a close that did not end the session
    (running, E.CLOSED, hop.HANDED_OVER_CLOSE, (Blame(OLD.pod), lost(E.VIOLATION))),  # a hand-over nobody asked for
    (running, E.LOST, None, (Blame(OLD.pod), lost(E.LOST))),
    (running, None, None, (Blame(OLD.pod), lost(E.LOST))),
    (running, E.SILENT, None, (Blame(OLD.pod), lost(E.SILENT))),
    (running, E.VIOLATION, None, (Blame(OLD.pod), lost(E.VIOLATION))),
    (running, E.TOO_LARGE, None, (lost(E.TOO_LARGE),)),  # what a client made the pod say
    # a record: the pod's faults resume the session elsewhere
    (recorded, E.CLOSED, 1000, resumed_after(E.VIOLATION)),
    (recorded, E.LOST, None, resumed_after(E.LOST)),
    (recorded, E.SILENT, None, resumed_after(E.SILENT)),
    (recorded, E.VIOLATION, None, resumed_after(E.VIOLATION)),
    (recorded, E.TOO_LARGE, None, (lost(E.TOO_LARGE),)),
    # after the pod's session.closed, the client's socket ends with the pod's code, whatever followed
    (closing, E.CLOSED, 1001, (EndClient("client_requested", 1001),)),
    (closing, E.CLOSED, None, (EndClient("client_requested", 1000),)),
    (closing, E.LOST, None, (EndClient("client_requested", 1000),)),
    (closing, E.TOO_LARGE, None, (EndClient("client_requested", 1000),)),
    (move_exporting_closing, E.CLOSED, 1000, (EndClient("client_requested", 1000),)),
    # the session goes on without this gateway, its record kept: taken over by a re-attach (the
    # caller hears 4409), or parked because this gateway was wedged (1012: reconnect, re-attach)
    (running, E.CLOSED, hop.TAKEN_OVER_CLOSE, (EndClient("taken_over", hop.TAKEN_OVER_CLOSE, goes_on=True),)),
    (recorded, E.CLOSED, hop.SILENT_CLOSE, (EndClient("parked", 1012, goes_on=True),)),
    # moving: before the export the session dies with its pod (or resumes); after it, the blob is the session
    (move_placing, E.CLOSED, hop.HANDED_OVER_CLOSE, (Moved("lost"), Blame(OLD.pod), lost(E.VIOLATION))),
    (move_placing, E.LOST, None, (Moved("lost"), Blame(OLD.pod), lost(E.LOST))),
    (move_placing_recorded, E.LOST, None, resumed_after(E.LOST)),
    (move_exporting, E.CLOSED, hop.HANDED_OVER_CLOSE, NOTHING),
    (move_exporting, E.CLOSED, 1001, (Unreserve(A), Moved("lost"), Blame(OLD.pod), lost(E.VIOLATION))),
    (move_exporting, E.LOST, None, (Unreserve(A), Moved("lost"), Blame(OLD.pod), lost(E.LOST))),
    (move_exporting, E.TOO_LARGE, None, (Unreserve(A), Moved("lost"), lost(E.TOO_LARGE))),
    (move_exporting_recorded, E.SILENT, None, (Unreserve(A), *resumed_after(E.SILENT))),
    (move_importing, E.CLOSED, hop.HANDED_OVER_CLOSE, NOTHING),  # only the order of frames waited on it
    (move_importing, E.LOST, None, NOTHING),
    (resuming, E.LOST, None, NOTHING),
    (ended, E.LOST, None, NOTHING),
    (ended, E.CLOSED, 1000, NOTHING),
]


@pytest.mark.parametrize(("state", "ending", "code", "commands"), GONE,
                         ids=[f"{s.__name__}-{e and e.value}-{c}" for s, e, c, _ in GONE])
def test_every_end_of_the_pods_socket_in_every_state(state: Callable[[], Relaying], ending: upstream.Ending | None,
                                                      code: int | None, commands: tuple[object, ...]) -> None:
    machine = state()
    assert machine.upstream_gone(ending, code, TRIPPED) == commands
    if any(isinstance(command, Lose | EndClient) for command in commands):
        assert machine.ended and machine.upstream_message(AUDIO) is NOTHING and machine.client_frame(b"x", 0) is NOTHING


# --- the pod's messages -----------------------------------------------------------------------------------

def test_audio_is_relayed_as_frames_and_the_rare_rest_verbatim() -> None:
    machine = Relaying(OLD)
    assert machine.upstream_message(AUDIO) is RELAY_FRAME  # a constant: nothing allocated per frame
    other = '{"type":"session.output_transcript.delta","delta":"hi"}'
    assert machine.upstream_message(other) == (RelayEvent(other),)
    assert machine.upstream_message(other.encode()) == (RelayEvent(other),)  # a binary message, decoded
    assert machine.upstream_message(AUDIO.encode()) == (RelayEvent(AUDIO),)  # only text is an audio frame
    assert machine.upstream_message("not json") == (RelayEvent("not json"),)


def test_a_checkpoint_is_kept_never_relayed_and_the_record_is_what_a_resume_offers() -> None:
    machine = Relaying(OLD)
    assert machine.upstream_message(checkpoint(b"ab")) is NOTHING
    assert machine.upstream_message(checkpoint(b"cd")) is NOTHING
    machine.upstream_gone(E.LOST, None, frozenset())
    assert machine.moving is not None and machine.placed(machine.moving, A) == (Import(A, b"abcd"),)


def test_a_record_over_its_bound_is_forgotten_once_and_the_session_is_then_lost_not_resumed() -> None:
    machine = Relaying(OLD)
    chunk = bytes(hop.MAX_RECORD_BYTES // 2)
    assert machine.upstream_message(checkpoint(chunk)) is NOTHING
    assert machine.upstream_message(checkpoint(chunk)) is NOTHING  # exactly at the bound: kept
    assert machine.upstream_message(checkpoint(b"x")) == (Forget("over its bound", hop.MAX_RECORD_BYTES + 1),)
    assert machine.upstream_message(checkpoint(b"y")) is NOTHING  # nothing more kept, nothing more said
    assert machine.upstream_gone(E.LOST, None, frozenset()) == (Blame(OLD.pod), Lose(relaying.LOST_BECAUSE[E.LOST],
                                                                                     "lost"))


def test_an_unreadable_checkpoint_forgets_the_record() -> None:
    machine = Relaying(OLD)
    machine.upstream_message(checkpoint(b"ab"))
    assert machine.upstream_message(hop.CHECKPOINT_PREFIX + 'no base64!"}') == (Forget("unreadable", 2),)
    assert machine.upstream_gone(E.SILENT, None, frozenset()) == (Blame(OLD.pod), Lose(
        relaying.LOST_BECAUSE[E.SILENT], "silent"))


# --- move requests ----------------------------------------------------------------------------------------

def test_a_move_request_is_never_relayed_and_starts_one_move_for_a_running_session() -> None:
    machine = running()
    assert machine.upstream_message(hop.MOVE_REQUEST) == (StartMove(),)
    assert machine.move(TRIPPED) == (Place(TRIPPED | {OLD.pod}),)
    assert not machine.watched  # the pod's quiet is the move's now


@pytest.mark.parametrize("state", [closing, move_placing, move_importing, resuming, ended])
def test_a_move_request_is_ignored_when_closing_moving_or_over(state: Callable[[], Relaying]) -> None:
    machine = state()
    before = machine.moving
    assert machine.move(TRIPPED) == NOTHING
    assert machine.moving is before


# --- the client's frames, per phase of a move --------------------------------------------------------------

def frame(n: int) -> bytes:
    return b"f%d" % n


def test_client_frames_are_forwarded_copied_while_the_old_pod_exports_then_held_and_follow_the_switch() -> None:
    machine = running()
    assert machine.client_frame(frame(0), 0) is FORWARD  # a constant: nothing allocated per frame
    machine.upstream_message(hop.MOVE_REQUEST)
    machine.move(frozenset())
    move = machine.moving
    assert move is not None
    assert machine.client_frame(frame(1), 0) is FORWARD  # placing: the session still runs where it is
    assert machine.placed(move, A) == (Export(),)
    for n in (2, 3, 4):  # exporting: forwarded, and kept in case the old pod does not read them
        assert machine.client_frame(frame(n), 0) is FORWARD
    # the export was asked after 2 messages; the pod read 3 more into the blob: 2 and 3 travel in it
    assert machine.exported(move, BLOB, 2, 4) == (Import(A, BLOB),)
    assert machine.client_frame(frame(5), 0) is NOTHING  # held for the next pod
    assert machine.imported(move, A, "imp_1") == NOTHING  # the old pod's last frames are on their way
    assert machine.upstream_gone(E.CLOSED, hop.HANDED_OVER_CLOSE, frozenset()) == (DialTarget(A, "imp_1"),)
    assert machine.client_frame(frame(6), 0) is NOTHING
    assert machine.answered(move, A, STARTED) == (Switch(A, (frame(4), frame(5), frame(6))), Moved("moved"))
    assert machine.serving == A and machine.moving is None and machine.watched
    assert machine.client_frame(frame(7), 0) is FORWARD


@given(before=st.integers(0, 5), exporting=st.integers(0, 5), read=st.integers(0, 5), after_blob=st.integers(0, 5))
def test_every_client_frame_reaches_a_pod_once_and_in_order_across_a_move(before: int, exporting: int, read: int,
                                                                          after_blob: int) -> None:
    """Whatever the old pod read into its blob of the frames sent while it exported, those it read
    and those the target is sent are all the client's frames, in order."""
    read = min(read, exporting)
    machine = running()
    sent = [n for n in range(before) if machine.client_frame(frame(n), 0) is FORWARD]
    machine.move(frozenset())
    move = machine.moving
    assert move is not None
    machine.placed(move, A)
    sent += [n for n in range(before, before + exporting) if machine.client_frame(frame(n), 0) is FORWARD]
    machine.exported(move, BLOB, before, before + read)
    total = before + exporting + after_blob
    assert all(machine.client_frame(frame(n), 0) is NOTHING for n in range(before + exporting, total))
    machine.upstream_gone(E.CLOSED, hop.HANDED_OVER_CLOSE, frozenset())
    machine.imported(move, A, "imp_1")
    switch = machine.answered(move, A, STARTED)[0]
    assert isinstance(switch, Switch)
    assert [frame(n) for n in sent[:before + read]] + list(switch.held) == [frame(n) for n in range(total)]


def test_a_resume_holds_every_client_frame_from_the_start_and_offers_the_record() -> None:
    machine = recorded()
    machine.upstream_gone(E.LOST, None, frozenset())
    move = machine.moving
    assert move is not None and move.resuming
    assert machine.client_frame(frame(0), 10 * relaying.MAX_UPSTREAM_BUFFER_BYTES) is NOTHING  # the dead pod's buffer
    assert machine.placed(move, A) == (Import(A, REC),)
    assert machine.imported(move, A, "imp_1") == (DialTarget(A, "imp_1"),)
    assert machine.client_frame(frame(1), 0) is NOTHING
    assert machine.answered(move, A, STARTED) == (Switch(A, (frame(0), frame(1))), Moved("resumed"))


def test_a_pod_that_does_not_read_loses_the_session_as_silent() -> None:
    machine = running()
    assert machine.client_frame(frame(0), relaying.MAX_UPSTREAM_BUFFER_BYTES) is FORWARD
    assert machine.client_frame(frame(1), relaying.MAX_UPSTREAM_BUFFER_BYTES + 1) == (
        Abort(), Blame(OLD.pod), lost(E.SILENT))
    assert machine.ended


def test_frames_held_past_the_bound_lose_the_moving_session() -> None:
    machine = move_importing()
    big = bytes(relaying.MAX_UPSTREAM_BUFFER_BYTES // 2)
    assert machine.client_frame(big, 0) is NOTHING
    assert machine.client_frame(big, 0) is NOTHING
    assert machine.client_frame(b"x", 0) == (Moved("lost"), Lose(relaying.HELD_TOO_LONG, relaying.NOT_TAKEN))
    assert machine.ended


def test_copies_kept_while_exporting_count_against_the_bound_too() -> None:
    machine = move_exporting()
    big = bytes(relaying.MAX_UPSTREAM_BUFFER_BYTES)
    assert machine.client_frame(big, 0) is FORWARD
    assert machine.client_frame(b"x", 0) == (Forward(), Moved("lost"),
                                             Lose(relaying.HELD_TOO_LONG, relaying.NOT_TAKEN))


# --- a move's ends ----------------------------------------------------------------------------------------

def test_no_room_anywhere_leaves_the_session_and_a_late_placement_is_given_back() -> None:
    machine = move_placing()
    move = machine.moving
    assert move is not None
    assert machine.placed(move, FULL) == (Recheck(placing.BUSY_RECHECK_S),)  # asked once more
    assert machine.rechecked(move) == (Place(TRIPPED | {OLD.pod}),)
    assert machine.placed(move, FULL) == (Moved("stayed"),)
    assert machine.moving is None and machine.watched
    assert machine.placed(move, B) == (Unreserve(B),)  # that move is over
    assert machine.placed(move, FULL) == NOTHING
    assert machine.client_frame(frame(0), 0) is FORWARD


def test_an_export_the_old_pod_refuses_gives_the_slot_back_and_drops_the_copies() -> None:
    machine = move_exporting()
    move = machine.moving
    assert move is not None
    assert machine.client_frame(frame(0), 0) is FORWARD  # a copy kept
    assert machine.exported(move, None, 5, 5) == (Unreserve(A), Moved("stayed"))
    machine.move(frozenset())  # a later move holds none of them
    again = machine.moving
    assert again is not None and again is not move
    machine.placed(again, B)
    machine.exported(again, BLOB, 0, 0)
    machine.upstream_gone(E.CLOSED, hop.HANDED_OVER_CLOSE, frozenset())
    machine.imported(again, B, "imp_2")
    assert machine.answered(again, B, STARTED) == (Switch(B, ()), Moved("moved"))


def test_a_blob_no_pod_takes_loses_the_session_and_gives_each_refused_slot_back() -> None:
    machine = move_importing()
    move = machine.moving
    assert move is not None
    assert machine.imported(move, A, None) == (Unreserve(A), Place(frozenset({OLD.pod, "pod-a"}) | TRIPPED))
    assert machine.placed(move, B) == (Import(B, BLOB),)
    assert machine.imported(move, B, None) == (Unreserve(B), Moved("lost"),
                                               Lose(moving.NO_POD_TOOK_IT, relaying.NOT_TAKEN))
    assert machine.ended


def test_outcomes_of_a_finished_move_change_nothing_in_the_next() -> None:
    machine = move_exporting()
    first = machine.moving
    assert first is not None
    machine.exported(first, None, 0, 0)  # stayed
    machine.move(frozenset())
    second = machine.moving
    assert second is not None
    assert machine.exported(first, BLOB, 0, 0) == NOTHING
    assert machine.imported(first, A, "imp_1") == NOTHING
    assert machine.imported(first, A, None) == (Unreserve(A),)
    assert machine.answered(first, A, STARTED) == NOTHING
    assert machine.unreachable(first, A) == NOTHING
    assert machine.rechecked(first) == NOTHING
    assert second.phase is moving.Phase.PLACING


def test_an_unreachable_target_is_excluded_and_one_more_tried() -> None:
    machine = move_importing()
    move = machine.moving
    assert move is not None
    machine.upstream_gone(E.CLOSED, hop.HANDED_OVER_CLOSE, frozenset())
    assert machine.imported(move, A, "imp_1") == (DialTarget(A, "imp_1"),)
    assert machine.unreachable(move, A) == (Place(frozenset({OLD.pod, "pod-a"}) | TRIPPED),)


def test_once_over_every_input_answers_nothing() -> None:
    machine = move_exporting()
    move = machine.moving
    assert move is not None
    machine.end()
    assert not machine.watched
    assert machine.upstream_message(AUDIO) is NOTHING
    assert machine.upstream_message(CLOSED) is NOTHING
    assert machine.client_frame(frame(0), 0) is NOTHING
    assert machine.upstream_gone(E.LOST, None, frozenset()) is NOTHING
    assert machine.exported(move, BLOB, 0, 0) is NOTHING
    assert machine.placed(move, A) == (Unreserve(A),)  # a slot reserved for it is still given back


# --- a moved or resumed session's replayed start ----------------------------------------------------------

def start_answer(start: dict, frames: int) -> list[str]:
    """What a sim pod with `--info-events` answers `start` with, as text on its socket: a real
    `Connection`, the session `Started` having run `frames` elsewhere (0: a new session)."""
    info = SimProfile().info()
    conn = connection.Connection(Served(info, Voices(info.voices, BUILTIN), ("gpt-live-1",)),
                                 Settings(info_events=True), 0)
    assert [type(a) for a in conn.receive(orjson.dumps(start).decode(), 0, 0.0)] == [connection.Start]
    return [events.dump(a.event) for a in conn.deliver([contract.Started(frames)]) if isinstance(a, connection.Send)]


def switched(resume: bool) -> Relaying:
    """A session that moved (or resumed) to A, its target's `session.started` answered."""
    if resume:
        machine = resuming()
    else:
        machine = move_importing()
        machine.upstream_gone(E.CLOSED, hop.HANDED_OVER_CLOSE, frozenset())
    move = machine.moving
    assert move is not None
    if resume:
        machine.placed(move, A)
    machine.imported(move, A, "imp_1")
    assert machine.answered(move, A, STARTED) == (Switch(A, ()), Moved("resumed" if resume else "moved"))
    return machine


@pytest.mark.parametrize("resume", [False, True], ids=["move", "resume"])
@pytest.mark.parametrize("kind", list(STARTS))
def test_the_next_pods_answer_to_a_replayed_start_never_reaches_the_client(kind: str, resume: bool) -> None:
    """Every start note, of every kind of start, is heard once: at the start, never at a move."""
    start, notes = STARTS[kind]
    first = start_answer(start, 0)
    assert [orjson.loads(text).get("code") for text in first] == [None, *notes]
    machine = Relaying(OLD)
    assert [machine.upstream_message(note) for note in first[1:]] == [(RelayEvent(note),) for note in first[1:]]
    machine = switched(resume)
    answer = start_answer(start, 100)  # as the next pod answers it: after 8 s run elsewhere
    assert answer[1:] == [text.replace(orjson.loads(text)["event_id"], orjson.loads(a)["event_id"])
                          for text, a in zip(first[1:], answer[1:], strict=True)]  # the same notes again
    assert [machine.upstream_message(text) for text in answer] == [NOTHING] * len(answer)
    assert [machine.upstream_message(text.encode()) for text in answer[1:]] == [NOTHING] * len(notes)
    assert machine.upstream_message(AUDIO) is RELAY_FRAME
    for text in answer:  # the answer is over: the pod's later events are the session's own
        assert machine.upstream_message(text) == (RelayEvent(text),)


def test_a_replayed_starts_answer_ends_at_the_first_event_of_another_kind() -> None:
    _, notes = STARTS["everything"]
    note = start_answer(STARTS["everything"][0], 100)[1]
    transcript = '{"type":"session.output_transcript.delta","delta":"hi"}'
    machine = switched(resume=False)
    assert machine.upstream_message(checkpoint(b"ab")) is NOTHING  # kept, not an event: the answer goes on
    assert machine.upstream_message(note) is NOTHING
    assert machine.upstream_message(transcript) == (RelayEvent(transcript),)
    assert machine.upstream_message(note) == (RelayEvent(note),)
    assert notes and machine.upstream_message(STARTED) == (RelayEvent(STARTED),)
