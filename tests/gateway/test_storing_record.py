"""A stored call's resume record is stored whole and gapless however its checkpoints and its
writes interleave: a checkpoint the relay keeps while a flush's write is in flight is written by
the next flush. (One tick missing at a chunk's boundary makes a record every pod refuses,
`handover_state`: a fork of a live stored call failed so, found by scripts/bench_fork.py --live.)"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from liveplex.gateway.stats import GatewayStats
from liveplex.storage import layout
from liveplex.storage.directory import DirectoryStore
from tests.gateway.test_storing import DELTA, FLUSH_S, RESOURCE, _recorder

pytestmark = pytest.mark.timeout(30)


class Growing(DirectoryStore):
    """A directory store during whose writes the relay keeps one more checkpoint (while `growing`)."""

    def __init__(self, root: Path, record: bytearray) -> None:
        super().__init__(root)
        self.record = record
        self.growing = True
        self.grown = 0

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        if self.growing:
            self.grown += 1
            self.record += b"T%03d" % self.grown  # a checkpoint kept while the write is in flight
        await super().put_many(items)


async def test_a_checkpoint_kept_during_a_write_is_stored_by_the_next(tmp_path: Path) -> None:
    record = bytearray(b"H000")
    store = Growing(tmp_path, record)
    call = _recorder(store, GatewayStats()).open(RESOURCE, "ab" * 32, 0, lambda: record, lambda _: None)
    while store.grown < 3:
        call.down(DELTA)
        await asyncio.sleep(FLUSH_S / 4)
    store.growing = False
    call.down(DELTA)
    call.end(ended=True)
    await call.written
    kept = b"".join([await store.get(e.key) or b"" for e in await store.list(layout.record_prefix(RESOURCE.id))])
    assert kept == bytes(record)  # every checkpoint, in order: none lost at a write's boundary


async def test_a_call_continued_by_another_writer_stores_its_record_after_the_first(tmp_path: Path) -> None:
    """A re-attached call's writer (another gateway's) starts from the pod's whole record, a head
    first: it goes on after what the first writer stored, so the stored record read in order is
    the first's then the second's, and a resume (or fork) reads it from its last head."""
    store = DirectoryStore(tmp_path)
    first = bytearray(b"H000T001")
    call = _recorder(store, GatewayStats()).open(RESOURCE, "ab" * 32, 0, lambda: first, lambda _: None)
    call.down(DELTA)
    call.end(ended=False)  # handed back: the call goes on through another gateway
    await call.written
    again = bytearray(b"H000T001T002")
    call = _recorder(store, GatewayStats()).open(RESOURCE, "ab" * 32, 1, lambda: again, lambda _: None)
    call.down(DELTA)
    call.end(ended=True)
    await call.written
    chunks = await store.list(layout.record_prefix(RESOURCE.id))
    kept = b"".join([await store.get(e.key) or b"" for e in chunks])
    assert kept == bytes(first + again) and layout.record_end(chunks) == len(kept)
