"""The channel between front end and engine: the handles that start and export sessions, and the
engine's inbox (live-contract §4).

The front end lives on an asyncio loop; the engine's `drive` loop runs on its own thread. A
session's caller audio crosses in `live.caller_audio`, its outputs in `live.outputs` (one hand-off
per tick), its submission in the queue of `live.submissions`; this module joins them: `LiveHandle`
(the front end's way in, never blocking) and `LiveInbox` (the engine's). Ending is ownership
(§4.4): the front end closes its `AudioSender` (a hangup) or its `OutputReceiver` (lost
interest); the engine sends `Closed` and drops its `OutputSink`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
from dataclasses import dataclass

from liveplex.live import caller_audio, contract, outputs
from liveplex.live.caller_audio import AudioReceiver, AudioSender
from liveplex.live.outputs import Handoff, OutputReceiver, OutputSink
from liveplex.live.pulse import Pulse
from liveplex.live.submissions import (
    CLOSED,
    DEFAULT_QUEUE,
    TIMEOUT,
    ExportRequest,
    LiveSubmission,
    Parked,
    Queue,
    Queued,
    Signal,
    State,
    blob_of,
)

__all__ = ["CLOSED", "DEFAULT_QUEUE", "TIMEOUT", "AudioReceiver", "AudioSender", "ExportRequest", "Handoff",
           "LiveHandle", "LiveInbox", "LiveSubmission", "Opened", "OutputReceiver", "OutputSink", "Parked",
           "Queued", "Rejected", "Signal", "State", "blob_of", "live_channel", "over"]


class Rejected(enum.Enum):
    """Why `LiveHandle.start` refused without queueing."""

    FULL = "the engine queue is full"
    STOPPED = "the engine has stopped"


@dataclass(frozen=True, slots=True)
class Opened:
    """A queued session: the front end's ends of its two pipes."""

    id: int
    session: contract.Session
    audio: AudioSender
    output: OutputReceiver


class _End:
    """What both ends of the channel see: the engine's `LiveInfo` and its `Pulse`."""

    def __init__(self, queue: Queue) -> None:
        self._q = queue

    @property
    def info(self) -> contract.LiveInfo:
        return self._q.info

    @property
    def pulse(self) -> Pulse:
        return self._q.pulse


class LiveHandle(_End):
    """The front end's way in: `start` a session without ever blocking."""

    def __init__(self, queue: Queue) -> None:
        super().__init__(queue)
        self._closed = False
        with queue.cond:
            queue.handles += 1

    @property
    def stopped(self) -> bool:
        return self._q.stopped

    def start(self, session: contract.Session, checkpoints: bool = False,
              outside_frames: int = 0) -> Opened | Rejected:
        """`checkpoints`: the session's outputs carry its resume record (`contract.Checkpoint`);
        `outside_frames`: as `resume`'s (a call that waited for its caller's speech, woken)."""
        return self._submit(session, None, checkpoints, outside_frames)

    def resume(self, session: contract.Session, state: State, checkpoints: bool = False,
               outside_frames: int = 0) -> Opened | Rejected:
        """Start a session that continues from a handover blob, a resume record or a parked state
        (`Ticker.take` imports it); one the engine cannot import ends it `Closed(ABORTED)` before `Started`.
        `outside_frames`: `LiveSubmission.outside_frames` (a paused session woken)."""
        return self._submit(session, state, checkpoints, outside_frames)

    def export(self, session_id: int, park: bool = False) -> concurrent.futures.Future[State | None]:
        """Hand session `session_id` (`Opened.id`) over at the next tick boundary: the future gets
        its blob (or None), its receiver `Closed(HANDED_OVER)` last. Never blocks; None at once
        when the engine has stopped or its queue is full. `park`: a pause, answered with a
        `Parked` state where the engine keeps one (its wake on this engine needs no prefill)."""
        reply: concurrent.futures.Future[State | None] = concurrent.futures.Future()
        q = self._q
        with q.cond:
            if q.stopped or self._closed or len(q.items) >= q.capacity:
                reply.set_result(None)
                return reply
            q.items.append(ExportRequest(session_id, reply, park))
            q.cond.notify()
        return reply

    def _submit(self, session: contract.Session, state: State | None, checkpoints: bool,
                outside_frames: int = 0) -> Opened | Rejected:
        q = self._q
        with q.cond:
            if q.stopped or self._closed:
                return Rejected.STOPPED
            if len(q.items) >= q.capacity:
                return Rejected.FULL
            sub_id = next(q.ids)
            sender, receiver = caller_audio.pipe()
            sink, output = outputs.pipe(q.handoff, sub_id)
            sub = LiveSubmission(sub_id, session, receiver, sink, state, checkpoints, outside_frames)
            q.items.append(sub)
            q.cond.notify()
        return Opened(sub.id, session, sender, output)

    def clone(self) -> LiveHandle:
        """Another handle on the same engine; the engine ends when every handle is closed."""
        return LiveHandle(self._q)

    def close(self) -> None:
        q = self._q
        with q.cond:
            if not self._closed:
                self._closed = True
                q.handles -= 1
                q.cond.notify()


class LiveInbox(_End):
    """The engine's way in: submissions, in order, and the flush of outputs."""

    def get(self, timeout_ns: int | None = None) -> Queued | Signal:
        """The next submission; `CLOSED` once every handle is gone; `TIMEOUT` after `timeout_ns`."""
        q = self._q
        timeout = None if timeout_ns is None else timeout_ns / 1e9
        with q.cond:
            ready = q.cond.wait_for(lambda: q.items or q.handles == 0, timeout)
            if q.items:
                return q.items.popleft()
            return CLOSED if ready else TIMEOUT

    def drain_nowait(self) -> list[Queued]:
        q = self._q
        with q.cond:
            out = list(q.items)
            q.items.clear()
        return out

    def flush(self, wait_ns: int = 0, spread_ns: int = 0) -> None:
        """Hand every output written since the last flush to the front end (paced: `Handoff.flush`)."""
        self._q.handoff.flush(wait_ns, spread_ns)

    def stop(self) -> None:
        """The engine is gone: refuse what is queued with ABORTED and every later start."""
        with self._q.cond:
            self._q.stopped = True
        for sub in self.drain_nowait():
            sub.refuse(contract.CloseReason.ABORTED)
        self.flush()


def live_channel(
    info: contract.LiveInfo,
    loop: asyncio.AbstractEventLoop,
    queue: int = DEFAULT_QUEUE,
) -> tuple[LiveHandle, LiveInbox]:
    """A handle and an inbox sharing one queue of `queue` submissions, one `Pulse`, one id counter.

    `loop` is the front end's event loop; outputs wake receivers awaited on it.
    """
    return over(info, Handoff(loop), queue)


def over(info: contract.LiveInfo, handoff: Handoff, queue: int = DEFAULT_QUEUE) -> tuple[LiveHandle, LiveInbox]:
    """`live_channel` whose outputs go through `handoff` (`live.by_hand` steps an engine off any loop)."""
    if queue <= 0:
        raise ValueError(f"queue must be > 0 submissions, got {queue}")
    q = Queue(info, queue, handoff)
    return LiveHandle(q), LiveInbox(q)
