"""The engine thread: one `drive` loop on its own thread, started from the front end's loop.

live-contract §4.5: a GPU engine runs `drive` on one dedicated thread (CUDA waits release the
GIL) and hands outputs to the loop once per tick; the sim engine runs the same way, so both share
one path. The runner owns the thread; the front end owns the handle it gets from `start`.

The engine thread and the front end's loop share the GIL. A thread that wakes while the other
holds it waits up to the interpreter's switch interval (5 ms by default) before the holder must
let go, so at the default a tick due while the loop writes a burst starts up to 5 ms late, and
every session's frame with it. Starting the engine lowers the process's interval to
`SWITCH_INTERVAL_S`: the handover costs a few µs more often, a due tick waits at most about 1 ms.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable

from liveplex.live import channel, contract
from liveplex.live.drive import Ticker, drive
from liveplex.live.pacing import Pacing
from liveplex.live.pulse import Pulse

logger = logging.getLogger(__name__)

SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval while an engine thread runs (see the module docstring)."""

EngineFactory = Callable[[contract.LiveInfo], Ticker]
"""Builds the engine on the engine thread (a GPU engine loads its weights there)."""


class EngineThread:
    """Runs `drive` for one engine; `ready` once the engine is built, `failed` after a fault."""

    def __init__(self, info: contract.LiveInfo, make_engine: EngineFactory,
                 queue: int = channel.DEFAULT_QUEUE, pacing: Pacing = Pacing()) -> None:
        self.info = info
        self._make_engine = make_engine
        self._queue = queue
        self.pacing = pacing
        """When each tick's frames leave (`drive`)."""
        self._thread: threading.Thread | None = None
        self._handle: channel.LiveHandle | None = None
        self._built = threading.Event()
        self.failed: BaseException | None = None
        """The exception that stopped the engine, if one did."""

    @property
    def ready(self) -> bool:
        """The engine is built and running, and has not failed."""
        return self._built.is_set() and self.failed is None and not self.stopped

    @property
    def pulse(self) -> Pulse | None:
        """The engine's counters, once `start` has opened the channel."""
        return None if self._handle is None else self._handle.pulse

    @property
    def stopped(self) -> bool:
        return self._handle is not None and self._handle.stopped

    def start(self, loop: asyncio.AbstractEventLoop) -> channel.LiveHandle:
        """Open the channel on `loop` and start the engine thread; returns the front end's handle."""
        if self._thread is not None:
            raise RuntimeError("the engine thread is already started")
        handle, inbox = channel.live_channel(self.info, loop, self._queue)
        self._handle = handle
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._run, args=(inbox,), name="liveplex-engine",
                                        daemon=True)
        self._thread.start()
        return handle

    def wait_built(self, timeout_s: float | None = None) -> bool:
        """Block until the engine is built (or failed to build)."""
        return self._built.wait(timeout_s)

    def _run(self, inbox: channel.LiveInbox) -> None:
        try:
            engine = self._make_engine(self.info)
        except BaseException as exc:
            self.failed = exc
            logger.error("engine failed to start", exc_info=True)
            inbox.stop()
            self._built.set()
            return
        self._built.set()
        try:
            drive(inbox, engine, pacing=self.pacing)
        except BaseException as exc:
            self.failed = exc
            logger.error("engine stopped on a fault", exc_info=True)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close the handle: the loop ends once running sessions end (the front end hangs them up)."""
        if self._handle is not None:
            self._handle.close()
        if self._thread is not None:
            self._thread.join(timeout_s)
