"""The sim's handovers (docs/continuity.md): a session's line and echo to a blob or a resume record, and back.

Pure: what the line carries (`Carried`) and the session's `Echo` in, bytes out; a blob or a record
in, the jitter buffer and the echo restored and `Imported` out, decoded and checked once. The sim
engine only decides when a session leaves and where an arriving one joins.
"""

from __future__ import annotations

import dataclasses
import struct
import time
from dataclasses import dataclass

import numpy as np

from liveplex.continuity import blob, carried, errors, record
from liveplex.live import contract, frames
from liveplex.live.jitter import Jitter
from liveplex.live.line import Carried
from liveplex.sim_pod.echo import Echo

KIND = "sim"
"""`blob.Header.kind` of the sim's handovers."""
NEXT_DUE = "next_due_unix_ns"
"""A sim blob's header scalar (optional): when the session's next frame was due, on the wall clock."""
TAIL = struct.Struct("<II")
"""A resume record's tail (docs/continuity.md): the echo's loud frames and words after a tick, so a
resumed echo goes on with its words; its delayed frames start silent."""


@dataclass(frozen=True, slots=True)
class Imported:
    """A blob or a record, checked and loaded into a session's jitter buffer and echo."""

    frames: int
    """Frames the session ran elsewhere: its next frame's number."""
    next_due_unix_ns: int | None
    """When its next frame was due on the wall clock (`NEXT_DUE`), if its blob says."""


def header(info: contract.LiveInfo, voice: str, ran: int, core: Echo) -> blob.Header:
    """What a blob or a record says the session is, with the echo's counters."""
    return blob.Header(KIND, info.model, info.context_frames, voice, ran, _settings(info),
                       {"loud_frames": core.loud_frames, "words": core.words})


def _settings(info: contract.LiveInfo) -> dict[str, str]:
    """The settings a handover must agree on: the echo's delay (the jitter cap is checked by size)."""
    return {"echo_frames": dict(info.engine)["echo_frames"]}


def export(info: contract.LiveInfo, voice: str, ran: int, line: Carried, core: Echo, due_ns: int | None) -> bytes:
    """The blob of a session that left its line (`line`): exact, the importing sim says and plays
    what this one would. `due_ns`: when its last frame was due (`perf_counter_ns`), so the
    importer knows when the next one is."""
    scalars, arrays = carried.part(line)
    state, delay = core.state()
    if due_ns is not None:  # on the wall clock: another pod's perf counter is not ours
        state[NEXT_DUE] = due_ns + frames.PERIOD_NS + time.time_ns() - time.perf_counter_ns()
    h = dataclasses.replace(header(info, voice, ran, core), state={**scalars, **state})
    return blob.encode(h, {**arrays, "delay": np.frombuffer(delay, np.uint8)})


def record_head(info: contract.LiveInfo, voice: str, ran: int, core: Echo) -> bytes:
    """A resume record's head, sent right after `Started`."""
    return record.head(header(info, voice, ran, core), {}, 0, TAIL.size)


def record_tick(ran: int, core: Echo) -> bytes:
    """The record's piece after frame `ran - 1`: the echo's counters as its tail."""
    return record.ticks(ran - 1, 1, b"", TAIL.pack(core.loud_frames, core.words))


def restore(state: bytes, info: contract.LiveInfo, voice: str, jitter: Jitter, core: Echo) -> Imported:
    """Load `state`, a blob or a record, into a session's `jitter` and `core`; raises `HandoverError`.

    From a record (its pod was lost): the frame count and the echo's counters go on, the delayed
    frames and the jitter buffer start empty, commentary not yet said is lost."""
    if record.is_record(state):
        rec = record.accept(state, info, KIND, voice)
        if rec.head.scalar("tick_bytes", int) != 0 or rec.head.scalar("tail_bytes", int) != TAIL.size:
            raise errors.state(("header", "state", "tail_bytes"), "is not the sim's tail")
        loud, words = (TAIL.unpack(rec.tail) if rec.tail is not None
                       else (rec.head.scalar("loud_frames", int), rec.head.scalar("words", int)))
        if loud < 0 or words < 0:
            raise errors.state(("header", "state", "words"), "counts below zero")
        core.restore(loud, words, [], core.state()[1])  # its delay as it is: silent
        carried.frames_within(rec.frames, info.max_frames)
        return Imported(rec.frames, None)
    h = blob.accept(state, info, KIND, voice)
    said = h.scalar("said", list)
    if not all(isinstance(w, str) for w in said):
        raise errors.state(("header", "state", "said"), "holds a word that is not a string")
    try:
        core.restore(h.scalar("loud_frames", int), h.scalar("words", int), said,
                     h.array("delay", "|u1", (None,)).tobytes())
    except ValueError as exc:
        raise errors.state(("arrays", "delay"), str(exc)) from None
    carried.restore(h, jitter, info.max_frames)
    due = h.header.state.get(NEXT_DUE)
    return Imported(h.header.frames, due if isinstance(due, int) and not isinstance(due, bool) else None)
