"""A session's outputs, engine to front end, and the one hand-off per tick (live-contract §4.5).

Outputs are appended to a `deque` per session from the engine thread; the pipes written to are
collected in a `Handoff`, and `drive` flushes it once per tick with **one**
`loop.call_soon_threadsafe` that wakes every waiting receiver, at once or paced (`pacing`: the
tick's frames leave on a schedule the tick's own timing does not move). Never one wake-up per
session per tick from the engine thread. A receiver sees only what a flush released. The engine
sends `Closed` and drops its `OutputSink` (§4.4); a sink garbage-collected drops itself.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable

from liveplex.live import contract, pacing


class Handoff:
    """Collects the output pipes written during a tick and wakes their receivers in one go, on
    the front end's `loop`, through one `call_soon_threadsafe` per flush (`live.by_hand` has one
    for engines stepped by hand, off any loop)."""

    __slots__ = ("_loop", "_dirty", "_lock")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._dirty: list[_OutputPipe] = []
        self._lock = threading.Lock()

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
                 "written", "visible", "taken", "gone_visible", "__weakref__")

    def __init__(self, handoff: Handoff, order: int) -> None:
        self.order = order
        """The session's submission id: hand-offs wake pipes in this order."""
        self.items: deque[contract.Output] = deque()
        self.receiver_closed = False
        self.sink_gone = False
        self.listener: Callable[[], None] | None = None
        self.marked = False
        self.handoff = handoff
        self.written = 0
        """Outputs the engine wrote (engine thread)."""
        self.visible = 0
        """Outputs released to the receiver (loop thread): a flush releases them (`_wake_all`)."""
        self.taken = 0
        """Outputs the receiver drained (loop thread)."""
        self.gone_visible = False
        """A release said the sink is gone: after the visible outputs, nothing more comes."""

    def ready(self) -> int:
        """Outputs the receiver may drain now."""
        return self.visible - self.taken

    def gone(self) -> bool:
        """The receiver may know that nothing more will ever arrive."""
        return self.gone_visible


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


def pipe(handoff: Handoff, order: int) -> tuple[OutputSink, OutputReceiver]:
    """A new session's two ends of its outputs; `order`: its place in a flush (its submission id)."""
    shared = _OutputPipe(handoff, order)
    return OutputSink(shared), OutputReceiver(shared)
