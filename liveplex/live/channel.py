"""The channel between front end and engine: submissions in, caller audio in, outputs out.

live-contract §4. The front end lives on an asyncio loop; the engine's `drive` loop runs on its own
thread. Crossing threads:

- Submissions go through a bounded queue (`LiveHandle.start` never blocks; a full queue is
  `Rejected.FULL`).
- Caller audio goes through a `deque` per session (`AudioSender.send` appends, the engine drains).
- Outputs are appended to a `deque` per session from the engine thread; the pipes written to are
  collected in a `Handoff`, and `drive` flushes it once per tick with **one**
  `loop.call_soon_threadsafe` that wakes every waiting receiver (§4.5), at once or paced
  (`pacing`: the tick's frames leave on a schedule the tick's own timing does not move). Never
  one wake-up per session per tick from the engine thread.

Ending is ownership (§4.4): the front end closes its `AudioSender` (a hangup) or its
`OutputReceiver` (lost interest); the engine sends `Closed` and drops its `OutputSink`. Senders and
sinks close themselves when garbage-collected, so a crashed handler still frees its session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import functools
import itertools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from liveplex.live import contract, pacing
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


class Rejected(enum.Enum):
    """Why `LiveHandle.start` refused without queueing."""

    FULL = "the engine queue is full"
    STOPPED = "the engine has stopped"


# --- caller audio -------------------------------------------------------------------------------

class _AudioPipe:
    __slots__ = ("chunks", "texts", "closed", "__weakref__")

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.texts: deque[str] = deque()
        """Text the model is asked to say (`session.commentary.append`), oldest first."""
        self.closed = False


def _close_audio(pipe: _AudioPipe) -> None:
    pipe.closed = True


class AudioSender:
    """The front end's end of a session's caller audio; closing it hangs the session up."""

    __slots__ = ("_pipe", "_finalizer", "__weakref__")

    def __init__(self, pipe: _AudioPipe) -> None:
        self._pipe = pipe
        self._finalizer = weakref.finalize(self, _close_audio, pipe)

    def send(self, data: bytes) -> None:
        """Queue caller bytes (any size); ignored once closed."""
        if not self._pipe.closed:
            self._pipe.chunks.append(data)

    def say(self, text: str) -> None:
        """Ask the model to say `text` (`session.commentary.append`); ignored once closed. The
        front end bounds each text (`gptlive.events.MAX_COMMENTARY_CHARS`), the engine the backlog."""
        if not self._pipe.closed:
            self._pipe.texts.append(text)

    def close(self) -> None:
        self._pipe.closed = True

    @property
    def closed(self) -> bool:
        return self._pipe.closed


class AudioReceiver:
    """The engine's end of a session's caller audio."""

    __slots__ = ("_pipe",)

    def __init__(self, pipe: _AudioPipe) -> None:
        self._pipe = pipe

    @property
    def closed(self) -> bool:
        """True once the front end hung up; read it before draining (live-contract §9)."""
        return self._pipe.closed

    def drain(self) -> list[bytes]:
        """Every chunk queued so far, oldest first."""
        popleft = self._pipe.chunks.popleft
        return [popleft() for _ in range(len(self._pipe.chunks))]  # the front end may append meanwhile

    def drain_texts(self) -> list[str]:
        """Every text to say queued so far, oldest first (usually none: one cheap length check)."""
        texts = self._pipe.texts
        if not texts:
            return []
        return [texts.popleft() for _ in range(len(texts))]


# --- outputs ------------------------------------------------------------------------------------

class Handoff:
    """Collects the output pipes written during a tick and wakes their receivers in one go.

    With a `loop`, waking happens on the loop through one `call_soon_threadsafe` per flush;
    without one (pure tests), receivers are only ever drained, never awaited.
    """

    __slots__ = ("_loop", "_dirty", "_lock")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self._dirty: list[_OutputPipe] = []
        self._lock = threading.Lock()

    @property
    def on_loop(self) -> bool:
        """Receivers are woken on an event loop (and see only what a flush released)."""
        return self._loop is not None

    def mark(self, pipe: _OutputPipe) -> None:
        if not pipe.marked:
            pipe.marked = True
            with self._lock:
                self._dirty.append(pipe)

    def flush(self, wait_ns: int = 0, spread_ns: int = 0) -> None:
        """Wake every receiver written to since the last flush (call from the engine thread):
        `wait_ns` from now, in waves over `spread_ns` (`pacing.waves`), in join order.

        Join order, not the order written: a session whose `Started` was written first in its
        first tick (a prefill, a start taken just before the tick) would lead that tick's burst
        and then fall back to its place, so every later frame would arrive a burst (or a whole
        spread) behind its first, for the whole call."""
        with self._lock:
            if not self._dirty:
                return
            pipes, self._dirty = self._dirty, []
        for pipe in pipes:
            pipe.marked = False
        if self._loop is None:
            return
        pipes.sort(key=_join_order)
        releases = [(pipe, pipe.written, pipe.sink_gone) for pipe in pipes]
        try:
            if wait_ns or spread_ns:
                self._loop.call_soon_threadsafe(_wake_paced, self._loop, releases, wait_ns, spread_ns,
                                                time.perf_counter_ns())
            else:
                self._loop.call_soon_threadsafe(_wake_all, releases)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            pass


def _join_order(pipe: _OutputPipe) -> int:
    return pipe.order


_Release = tuple["_OutputPipe", int, bool]
"""A pipe as a flush left it: outputs written so far, and whether its sink was gone."""


def _wake_paced(loop: asyncio.AbstractEventLoop, releases: list[_Release], wait_ns: int, spread_ns: int,
                flushed_ns: int) -> None:
    """On the loop: release each wave now or on a timer, counting the hop from the engine thread."""
    hop_ns = time.perf_counter_ns() - flushed_ns
    start = 0
    for end, delay_ns in pacing.waves(len(releases), wait_ns - hop_ns, spread_ns):
        wave = releases[start:end]
        start = end
        if delay_ns <= 0:
            _wake_all(wave)
        else:
            loop.call_later(delay_ns / 1e9, _wake_all, wave)


def _wake_all(releases: list[_Release]) -> None:
    """Make what each flush covered visible to its receiver, then wake the receiver. Outputs the
    engine wrote after that flush stay invisible until their own, even to a receiver woken
    early by another one (a `Started` flushed at once just before the tick), so a paced frame
    never leaves ahead of its wave."""
    for pipe, written, gone in releases:
        if written > pipe.visible:
            pipe.visible = written
        if gone:
            pipe.gone_visible = True
        listener = pipe.listener
        if listener is not None:
            listener()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _OutputPipe:
    __slots__ = ("items", "receiver_closed", "sink_gone", "listener", "marked", "handoff", "order",
                 "written", "visible", "taken", "gone_visible", "held", "__weakref__")

    def __init__(self, handoff: Handoff, order: int) -> None:
        self.order = order
        """The session's submission id: hand-offs wake pipes in this order."""
        self.items: deque[contract.Output] = deque()
        self.receiver_closed = False
        self.sink_gone = False
        self.listener: Callable[[], None] | None = None
        self.marked = False
        self.handoff = handoff
        self.held = handoff.on_loop
        """Outputs become visible only when a flush releases them (`_wake_all`); without a
        loop (pure tests) everything written is visible at once."""
        self.written = 0
        """Outputs the engine wrote (engine thread)."""
        self.visible = 0
        """Outputs released to the receiver (loop thread)."""
        self.taken = 0
        """Outputs the receiver drained (loop thread)."""
        self.gone_visible = False
        """A release said the sink is gone: after the visible outputs, nothing more comes."""

    def ready(self) -> int:
        """Outputs the receiver may drain now."""
        return self.visible - self.taken if self.held else len(self.items)

    def gone(self) -> bool:
        """The receiver may know that nothing more will ever arrive."""
        return self.gone_visible if self.held else self.sink_gone


def _drop_sink(pipe: _OutputPipe) -> None:
    if not pipe.sink_gone:
        pipe.sink_gone = True
        pipe.handoff.mark(pipe)


class OutputSink:
    """The engine's end of a session's outputs. Unbounded: the engine never waits on a client."""

    __slots__ = ("_pipe", "_finalizer", "__weakref__")

    def __init__(self, pipe: _OutputPipe) -> None:
        self._pipe = pipe
        self._finalizer = weakref.finalize(self, _drop_sink, pipe)

    def send(self, output: contract.Output) -> bool:
        """Queue one output; False once the receiver is closed (the engine then drops the line)."""
        pipe = self._pipe
        if pipe.receiver_closed or pipe.sink_gone:
            return False
        pipe.items.append(output)
        pipe.written += 1
        if not pipe.marked:
            pipe.handoff.mark(pipe)
        return True

    def drop(self) -> None:
        """The engine is done with this session; the receiver sees the end of its outputs."""
        _drop_sink(self._pipe)


class OutputReceiver:
    """The front end's end of a session's outputs; awaited on the loop."""

    __slots__ = ("_pipe",)

    def __init__(self, pipe: _OutputPipe) -> None:
        self._pipe = pipe

    def drain(self) -> list[contract.Output]:
        """Everything delivered so far, in order; never waits."""
        pipe = self._pipe
        popleft = pipe.items.popleft
        out = [popleft() for _ in range(pipe.ready())]
        pipe.taken += len(out)
        return out

    @property
    def ended(self) -> bool:
        """The sink is gone and every output was drained: nothing more will ever arrive."""
        pipe = self._pipe
        return pipe.gone() and not pipe.ready()

    async def next(self) -> list[contract.Output]:
        """Wait for outputs; an empty list means the sink is gone and nothing more will come."""
        pipe = self._pipe
        while not pipe.ready() and not pipe.gone():
            woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            # handoffs run on this loop, so nothing lands between the check above and this line
            self.listen(functools.partial(_resolve, woken))
            try:
                await woken
            finally:
                self.listen(None)
        return self.drain()

    def listen(self, listener: Callable[[], None] | None) -> None:
        """Call `listener` on the loop at each handoff (a push-driven front end drains in it; it
        must not raise); None stops listening. `next` is this with a future."""
        self._pipe.listener = listener

    def close(self) -> None:
        """Lose interest: from now on the engine's sends return False."""
        self._pipe.receiver_closed = True
        self._pipe.listener = None


# --- submissions --------------------------------------------------------------------------------

@dataclass(slots=True)
class LiveSubmission:
    """A session on its way to the engine."""

    id: int
    session: contract.Session
    input: AudioReceiver
    sink: OutputSink
    state: bytes | None = None
    """A handover blob (`liveplex.continuity`): the session continues from it; None: a fresh one."""

    def refuse(self, reason: contract.CloseReason) -> None:
        self.sink.send(contract.Closed.refused(reason))
        self.sink.drop()


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """Take running session `id` out of the engine at the next tick boundary (docs/continuity.md)."""

    id: int
    reply: concurrent.futures.Future[bytes | None]
    """Its blob, or None when it does not run (unknown, ended, not yet started, engine stopped)."""

    def refuse(self, reason: contract.CloseReason) -> None:
        """The engine stopped before the boundary: nothing was exported."""
        if not self.reply.done():
            self.reply.set_result(None)


Queued = LiveSubmission | ExportRequest
"""What the engine queue holds: sessions to take, sessions to hand over."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A queued session: the front end's ends of its two pipes."""

    id: int
    session: contract.Session
    audio: AudioSender
    output: OutputReceiver


class _Queue:
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


class _End:
    """What both ends of the channel see: the engine's `LiveInfo` and its `Pulse`."""

    def __init__(self, queue: _Queue) -> None:
        self._q = queue

    @property
    def info(self) -> contract.LiveInfo:
        return self._q.info

    @property
    def pulse(self) -> Pulse:
        return self._q.pulse


class LiveHandle(_End):
    """The front end's way in: `start` a session without ever blocking."""

    def __init__(self, queue: _Queue) -> None:
        super().__init__(queue)
        self._closed = False
        with queue.cond:
            queue.handles += 1

    @property
    def stopped(self) -> bool:
        return self._q.stopped

    def start(self, session: contract.Session) -> Opened | Rejected:
        return self._submit(session, None)

    def resume(self, session: contract.Session, state: bytes) -> Opened | Rejected:
        """Start a session that continues from a handover blob (`Ticker.take` imports it); a blob
        the engine cannot import ends it `Closed(ABORTED)` before `Started`."""
        return self._submit(session, state)

    def export(self, session_id: int) -> concurrent.futures.Future[bytes | None]:
        """Hand session `session_id` (`Opened.id`) over at the next tick boundary: the future gets
        its blob (or None), its receiver `Closed(HANDED_OVER)` last. Never blocks; None at once
        when the engine has stopped or its queue is full."""
        reply: concurrent.futures.Future[bytes | None] = concurrent.futures.Future()
        q = self._q
        with q.cond:
            if q.stopped or self._closed or len(q.items) >= q.capacity:
                reply.set_result(None)
                return reply
            q.items.append(ExportRequest(session_id, reply))
            q.cond.notify()
        return reply

    def _submit(self, session: contract.Session, state: bytes | None) -> Opened | Rejected:
        q = self._q
        with q.cond:
            if q.stopped or self._closed:
                return Rejected.STOPPED
            if len(q.items) >= q.capacity:
                return Rejected.FULL
            sub_id = next(q.ids)
            audio_pipe, output_pipe = _AudioPipe(), _OutputPipe(q.handoff, sub_id)
            sub = LiveSubmission(sub_id, session, AudioReceiver(audio_pipe), OutputSink(output_pipe), state)
            q.items.append(sub)
            q.cond.notify()
        return Opened(sub.id, session, AudioSender(audio_pipe), OutputReceiver(output_pipe))

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
    queue: int = DEFAULT_QUEUE,
    loop: asyncio.AbstractEventLoop | None = None,
) -> tuple[LiveHandle, LiveInbox]:
    """A handle and an inbox sharing one queue of `queue` submissions, one `Pulse`, one id counter.

    `loop` is the front end's event loop; outputs wake receivers awaited on it.
    """
    if queue <= 0:
        raise ValueError(f"queue must be > 0 submissions, got {queue}")
    q = _Queue(info, queue, Handoff(loop))
    return LiveHandle(q), LiveInbox(q)
