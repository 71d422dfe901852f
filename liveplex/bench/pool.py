"""Client processes for the bench, so the client is never the bottleneck (`--workers K`).

With one worker the sessions run on the caller's own event loop. With K > 1, K spawned processes
each run every K-th session on their own uvloop; the parent hands out the level, waits until every
worker has prepared its audio, then gives one epoch on the shared `perf_counter_ns` clock, so the
stagger holds across processes. Workers publish live counts into a shared array for the progress
display and send their results back over a pipe when the level ends.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import time
from multiprocessing import connection as mp_connection
from multiprocessing.process import BaseProcess
from typing import Self

from liveplex import cli
from liveplex.bench import audio, caller, crowd, loop

LEAD_NS = 200_000_000
"""Time between handing out the epoch and the first session's start: covers the pipe hop."""

FLUSH_S = 0.2
"""How often a worker publishes its counts for the progress display."""

_FIELDS = 4  # started, ok, failed, frames


class Pool:
    """K client processes (or the current loop when K is 1); use as a context manager."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._local = caller.Tally()
        self._conns: list[mp_connection.Connection] = []
        self._procs: list[BaseProcess] = []
        ctx = multiprocessing.get_context("spawn")
        self._shared = ctx.Array("q", _FIELDS * workers, lock=False) if workers > 1 else None
        for slot in range(workers if workers > 1 else 0):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_work, args=(child, self._shared, slot), daemon=True,
                               name=f"liveplex-bench-{slot}")
            proc.start()
            self._conns.append(parent)
            self._procs.append(proc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def counts(self) -> tuple[int, int, int, int]:
        """Live (started, ok, failed, frames) of the running level, summed over workers."""
        if self._shared is None:
            t = self._local
            return t.started, t.ok, t.failed, t.frames
        values = list(self._shared)
        return tuple(sum(values[f::_FIELDS]) for f in range(_FIELDS))  # type: ignore[return-value]

    async def run(
        self, settings: caller.CallSettings, source: audio.Source, sessions: int, stagger_ns: int
    ) -> list[caller.CallResult]:
        """Run one level of `sessions` sessions and return their results in session order."""
        if self._shared is None:
            self._local = caller.Tally()
            indices = list(range(sessions))
            sounds = await asyncio.to_thread(crowd.prepare, settings, source, indices)
            freeze_heap()
            epoch = time.perf_counter_ns() + LEAD_NS
            return await crowd.crowd(settings, sounds, indices, epoch, stagger_ns, self._local)
        for i in range(len(self._shared)):
            self._shared[i] = 0
        shares = [list(range(w, sessions, self.workers)) for w in range(self.workers)]
        for conn, share in zip(self._conns, shares):
            conn.send((settings, source, share, stagger_ns))
        await asyncio.gather(*(asyncio.to_thread(_expect_ready, conn) for conn in self._conns))
        epoch = time.perf_counter_ns() + LEAD_NS
        for conn in self._conns:
            conn.send(epoch)
        parts = await asyncio.gather(*(asyncio.to_thread(conn.recv) for conn in self._conns))
        results: list[caller.CallResult | None] = [None] * sessions
        for share, part in zip(shares, parts):
            for i, result in zip(share, part):
                results[i] = result
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the worker processes."""
        for conn in self._conns:
            conn.send(None)
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        self._conns.clear()
        self._procs.clear()


def freeze_heap() -> None:
    """Take what exists before a level (the prepared audio above all) out of the cyclic
    collector's view, so that no full collection pauses a client mid-level: the client's own
    pauses would read as the server's lateness."""
    gc.collect()
    gc.freeze()


def _expect_ready(conn: mp_connection.Connection) -> None:
    """Block until a worker reports that its audio is prepared; its missing extra is the bench's."""
    reply = conn.recv()
    if isinstance(reply, cli.MissingExtra):
        raise reply
    if reply != "ready":
        raise RuntimeError(f"bench worker failed: {reply}")


def _work(conn: mp_connection.Connection, shared: multiprocessing.Array, slot: int) -> None:  # type: ignore[valid-type]
    """A worker process: run each level it is handed until it receives None."""
    while (job := conn.recv()) is not None:
        settings, source, share, stagger_ns = job
        try:
            sounds = crowd.prepare(settings, source, share)
        except cli.MissingExtra as exc:  # the parent raises it, for its one line (resampling needs `bench`)
            conn.send(exc)
            continue
        except Exception as exc:  # noqa: BLE001 - any failure goes to the parent, which raises it
            conn.send(f"{type(exc).__name__}: {exc}")
            continue
        freeze_heap()
        conn.send("ready")
        epoch = conn.recv()
        conn.send(loop.run(_level(settings, sounds, share, epoch, stagger_ns, shared, slot)))


async def _level(
    settings: caller.CallSettings,
    sounds: list[bytes],
    share: list[int],
    epoch_ns: int,
    stagger_ns: int,
    shared: multiprocessing.Array,  # type: ignore[valid-type]
    slot: int,
) -> list[caller.CallResult]:
    """One worker's share of a level, publishing its counts every `FLUSH_S`."""
    tally = caller.Tally()
    base = slot * _FIELDS

    def flush() -> None:
        shared[base : base + _FIELDS] = [tally.started, tally.ok, tally.failed, tally.frames]

    async def publish() -> None:
        while True:
            flush()
            await asyncio.sleep(FLUSH_S)

    publisher = asyncio.create_task(publish())
    try:
        return await crowd.crowd(settings, sounds, share, epoch_ns, stagger_ns, tally)
    finally:
        publisher.cancel()
        flush()
