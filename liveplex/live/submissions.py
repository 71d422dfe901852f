"""What the engine's queue holds, and the queue: sessions to take, sessions to hand over.

live-contract §4. The queue is bounded (`LiveHandle.start` never blocks; a full queue is
`Rejected.FULL`) and shared by every handle and the engine's inbox (`live.channel`).
"""

from __future__ import annotations

import concurrent.futures
import enum
import itertools
import threading
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from liveplex.live import contract
from liveplex.live.caller_audio import AudioReceiver
from liveplex.live.outputs import Handoff, OutputSink
from liveplex.live.pulse import Pulse

DEFAULT_QUEUE = 65_536
"""Submissions the engine queue holds before `start` answers `Rejected.FULL`."""


class Signal(enum.Enum):
    """What `LiveInbox.get` returns instead of a submission."""

    CLOSED = "closed"
    """Every handle is closed and the queue is empty."""
    TIMEOUT = "timeout"
    """Nothing arrived within the timeout."""


CLOSED = Signal.CLOSED
TIMEOUT = Signal.TIMEOUT


class Parked(Protocol):
    """A paused session's whole state held in host memory by the engine that ran it, unserialized
    (docs/pause.md): resumed on that engine it is copied back into a slot as it was, no prefill;
    anywhere else (a move) it is its handover blob."""

    @property
    def nbytes(self) -> int:
        """Host bytes it holds."""
        ...

    def blob(self) -> bytes:
        """Its handover blob, what a move carries (built when asked)."""
        ...


State = bytes | Parked
"""What a session continues from: a handover blob or resume record, or a parked state."""


def blob_of(state: State) -> bytes:
    """`state` as bytes: a parked state's blob."""
    return state if isinstance(state, bytes) else state.blob()


@dataclass(slots=True)
class LiveSubmission:
    """A session on its way to the engine."""

    id: int
    session: contract.Session
    input: AudioReceiver
    sink: OutputSink
    state: State | None = None
    """A handover blob or a resume record (`liveplex.continuity`), or a parked state: the
    session continues from it; None: a fresh one."""
    checkpoints: bool = False
    """Send `contract.Checkpoint`s: a gateway keeps them to resume the session elsewhere."""
    outside_frames: int = 0
    """Frames of the session's time it spent out of any engine (paused, docs/pause.md): its
    `max_frames` shrinks by them, so it still ends at its wall-clock end."""

    def refuse(self, reason: contract.CloseReason) -> None:
        self.sink.send(contract.Closed.refused(reason))
        self.sink.drop()


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """Take running session `id` out of the engine right after the next tick (docs/continuity.md)."""

    id: int
    reply: concurrent.futures.Future[State | None]
    """Its blob, or None when it does not run (unknown, ended, not yet started, engine stopped)."""
    park: bool = False
    """A pause: the engine may answer a `Parked` state instead of a blob."""

    def refuse(self, reason: contract.CloseReason) -> None:
        """The engine stopped before the boundary: nothing was exported."""
        if not self.reply.done():
            self.reply.set_result(None)


Queued = LiveSubmission | ExportRequest
"""What the engine queue holds: sessions to take, sessions to hand over."""


class Queue:
    """The bounded submission queue plus the bookkeeping shared by handles and the inbox."""

    def __init__(self, info: contract.LiveInfo, capacity: int, handoff: Handoff) -> None:
        self.info = info
        self.capacity = capacity
        self.handoff = handoff
        self.pulse = Pulse()
        self.ids = itertools.count(1)
        self.items: deque[Queued] = deque()
        self.cond = threading.Condition()
        self.handles = 0
        self.stopped = False
