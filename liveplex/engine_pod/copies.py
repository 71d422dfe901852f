"""A pause's host copies off the tick's stream (issue 43, docs/pause.md "The copy stream").

A park or a wake copies one slot's rows (1.48 GiB at the 7B, bf16) over the host link: ~32 ms,
longer than a tick may wait. On CUDA they run on a stream of their own while ticks run on theirs,
from or into the engine's spare slot, the one slot no tick group's bucket holds (a tick's graphs
write every row of their bucket, padding rows included). The copy waits for what the tick's stream
queued before it (so it sees the rows moved into the spare, and a move out of the spare is done
before it is overwritten); the engine reads or reuses the spare only once the copy is `done`. On
the CPU there is no stream: a copy is made when asked and is done at once, in the same order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from liveplex.engine_pod import program


class Copy:
    """One copy issued: `done` once its event completed (at once without one: the CPU's)."""

    __slots__ = ("_event",)

    def __init__(self, event: torch.cuda.Event | None = None) -> None:
        self._event = event

    def done(self) -> bool:
        """Whether it completed (asks the device; never waits)."""
        return self._event is None or self._event.query()

    def wait(self) -> None:
        """Block this thread until it completed: before its host rows are read."""
        if self._event is not None:
            self._event.synchronize()

    def before(self, device: torch.device) -> None:
        """The tick's stream waits for it before what it queues next (it is `done`: no wait on the device)."""
        if self._event is not None:
            torch.cuda.current_stream(device).wait_event(self._event)


DONE = Copy()
"""A copy made synchronously."""


class Copies:
    """Copies between a slot of `pools` and host rows: on a copy stream of their own on CUDA,
    synchronous on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def down(self, pools: program.Pools, slot: int) -> tuple[program.HostRows, Copy]:
        """`slot`'s rows into fresh host rows (pinned on CUDA): read them once the copy is done."""
        with self._on() as event:
            rows = pools.park(slot, non_blocking=self._stream is not None)
        return rows, Copy(event)

    def up(self, pools: program.Pools, slot: int, rows: program.HostRows) -> Copy:
        """Host rows into `slot`: the slot holds them once the copy is done."""
        with self._on() as event:
            pools.unpark(slot, rows, non_blocking=self._stream is not None)
        return Copy(event)

    @contextlib.contextmanager
    def _on(self) -> Iterator[torch.cuda.Event | None]:
        """Copies queued in the block run on the copy stream after what the tick's stream queued
        so far; the event yielded is recorded after them (None on the CPU)."""
        if self._stream is None:
            yield None
            return
        self._stream.wait_stream(torch.cuda.current_stream(self._device))
        event = torch.cuda.Event()
        with torch.cuda.stream(self._stream):
            yield event
            event.record(self._stream)
