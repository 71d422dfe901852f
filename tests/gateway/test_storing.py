"""A stored call's writer (`storing.StoredCall`) against a real directory store: what the relay
hands it is written every `flush_s` (so a gateway lost mid-call loses at most that much: the bound
docs/storage.md states), its meta says live, then ended with its length; a store that fails, or
falls behind, stops storing that call with one `info store_unavailable` to its caller and the
failure counted, never an exception into the relay. Retention deletes what is past its day, and
a call whose gateway let go of it without its end, never continued, is marked ended, `lost`."""

from __future__ import annotations

import asyncio
import base64
import datetime
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import orjson
import pytest

from liveplex.gateway import storing
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive import events
from liveplex.live import frames
from liveplex.storage import layout, retention
from liveplex.storage.directory import DirectoryStore
from liveplex.storage.settings import StoreSettings
from liveplex.storage.store import Entry, StoreError

pytestmark = pytest.mark.timeout(30)

FLUSH_S = 0.2
RESOURCE = events.SessionResource("sess_stored", 0, "gpt-live-1", "hi", events.DEFAULT_FORMAT, "NATF2", store=True)
DELTA = events.dump(events.OutputAudioDelta(
    base64.b64encode(np.full(frames.FRAME_SAMPLES, 3, "<i2").tobytes()).decode()))
APPEND = orjson.dumps({"type": "session.input_audio.append",
                       "audio": base64.b64encode(np.full(frames.FRAME_SAMPLES, 5, "<i2").tobytes()).decode()}).decode()


class Down(DirectoryStore):
    """A directory store whose writes fail from the `after`-th on (a disk full, a bucket gone)."""

    def __init__(self, root: Path, after: int) -> None:
        super().__init__(root)
        self.puts = 0
        self._after = after

    async def put(self, key: str, data: bytes) -> None:
        self.puts += 1
        if self.puts > self._after:
            raise StoreError("no space left on device")
        await super().put(key, data)

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        for key, data in items:
            await self.put(key, data)


def _recorder(store: DirectoryStore, stats: GatewayStats, retention_days: int = 30) -> storing.Recorder:
    return storing.Recorder(store, StoreSettings(directory=Path("/unused"), flush_s=FLUSH_S,
                                                 retention_days=retention_days), stats)


async def _frames_stored(store: DirectoryStore) -> int:
    return sum(e.size for e in await store.list(layout.audio_prefix(RESOURCE.id))) // layout.FRAME_BYTES


async def test_a_stored_call_is_written_while_it_runs_and_marked_ended(tmp_path: Path) -> None:
    store, stats, told = DirectoryStore(tmp_path), GatewayStats(), []
    record = bytearray(b"checkpoint-1")
    call = _recorder(store, stats).open(RESOURCE, "ab" * 32, 0, lambda: record, told.append)
    for _ in range(5):
        call.up(APPEND)
        call.down(DELTA)
    call.event('{"type":"session.output_transcript.delta","delta":"hello"}')
    await asyncio.sleep(FLUSH_S * 2.5)  # the bound: what the relay handed over is stored by now
    assert await _frames_stored(store) == 5
    meta = layout.Meta.load(await store.get(layout.meta_key(RESOURCE.id)) or b"")
    assert meta is not None and meta.status == "live" and meta.owned_by("ab" * 32) and meta.session["store"] is True
    record += b"+checkpoint-2"
    call.down(DELTA)
    call.end(ended=True)
    await call.written
    assert await _frames_stored(store) == 6
    meta = layout.Meta.load(await store.get(layout.meta_key(RESOURCE.id)) or b"")
    assert meta is not None and (meta.status, meta.frames) == ("ended", 6)
    kept = b"".join([await store.get(e.key) or b"" for e in await store.list(f"sessions/{RESOURCE.id}/record/")])
    assert kept == bytes(record)
    assert told == [] and stats.stored["complete"] == 1 and stats.stored_bytes > 6 * layout.FRAME_BYTES
    expiry = await store.list(layout.EXPIRY)
    assert [e.key.split("/")[2] for e in expiry] == [RESOURCE.id]


@pytest.mark.parametrize("after", [0, 2])
async def test_a_store_that_fails_stops_storing_the_call_with_one_event(tmp_path: Path, after: int) -> None:
    store, stats, told = Down(tmp_path, after), GatewayStats(), []
    call = _recorder(store, stats).open(RESOURCE, "ab" * 32, 0, lambda: None, told.append)
    for _ in range(40):
        call.up(APPEND)
        call.down(DELTA)
        await asyncio.sleep(0.02)
    await asyncio.wait_for(call.written, 5)
    call.down(DELTA)  # the relay goes on: nothing is kept any more, nothing raised
    call.end(ended=True)
    assert stats.stored["failed"] == 1 and store.puts == after + 2  # the write that failed, then the meta's try
    assert [orjson.loads(t)["code"] for t in told] == [storing.STORE_UNAVAILABLE]
    assert orjson.loads(told[0])["type"] == "info"


@pytest.mark.parametrize("relayed", ["audio", "events"])
async def test_a_store_that_falls_behind_is_as_good_as_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            relayed: str) -> None:
    """Whatever the relay hands over counts toward the bound: audio, and events (transcripts)."""
    monkeypatch.setattr(storing, "MAX_PENDING_BYTES", 40 * len(DELTA))
    store, stats, told = DirectoryStore(tmp_path), GatewayStats(), []
    call = _recorder(store, stats).open(RESOURCE, "ab" * 32, 0, lambda: None, told.append)
    transcript = orjson.dumps({"type": "session.output_transcript.delta", "delta": "x" * len(DELTA)}).decode()
    for _ in range(50):  # faster than any flush
        if relayed == "audio":
            call.down(DELTA)
        else:
            call.event(transcript)
    await asyncio.wait_for(call.written, 5)
    assert stats.stored["failed"] == 1 and len(told) == 1
    meta = layout.Meta.load(await store.get(layout.meta_key(RESOURCE.id)) or b"")
    assert meta is not None and (meta.status, meta.degraded) == ("live", "the store fell behind the call")


async def test_retention_deletes_sessions_past_their_day_and_nothing_else(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    today = datetime.date(2027, 3, 10)
    for session_id, day in (("sess_old", today - datetime.timedelta(days=1)), ("sess_new", today)):
        await store.put(layout.meta_key(session_id), b"{}")
        await store.put(layout.audio_key(session_id, 0), b"x")
        await store.put(layout.expiry_key(day, session_id), b"")
    assert await retention.sweep(store, today) == ["sess_old"]
    left: Sequence[Entry] = await store.list("")
    assert sorted(e.key for e in left) == sorted([layout.meta_key("sess_new"), layout.audio_key("sess_new", 0),
                                                  layout.expiry_key(today, "sess_new")])
    assert _recorder(store, GatewayStats(), retention_days=0).expires_on(0) is None
    assert _recorder(store, GatewayStats(), retention_days=2).expires_on(0) == "1970-01-03"


async def test_a_call_never_continued_is_marked_ended_lost_by_the_sweep(tmp_path: Path) -> None:
    """Its gateway let go of it (died, or drained and the caller never re-attached): its meta says
    live until its `live/` entry is `LOST_AFTER_S` old, then ended, `lost`, with the frames stored.
    A call that ended is no live entry, and a live one whose entry is fresh is left alone."""
    store, stats = DirectoryStore(tmp_path), GatewayStats()
    recorder = _recorder(store, stats)
    ended = events.SessionResource("sess_ended", 0, "gpt-live-1", "hi", events.DEFAULT_FORMAT, "NATF2", store=True)
    calls = [(recorder.open(RESOURCE, "ab" * 32, 100, lambda: None, [].append), False),
             (recorder.open(ended, "ab" * 32, 0, lambda: None, [].append), True)]
    for call, _ in calls:
        for _ in range(3):
            call.up(APPEND)
            call.down(DELTA)
    await asyncio.sleep(FLUSH_S * 1.5)
    assert [e.key for e in await store.list(layout.LIVE)] == sorted(layout.live_key(c) for c in (RESOURCE.id, ended.id))
    for call, really in calls:
        call.end(ended=really)
        await call.written
    assert [e.key for e in await store.list(layout.LIVE)] == [layout.live_key(RESOURCE.id)]
    assert await retention.end_lost(store, time.time() + retention.LOST_AFTER_S - 5) == []
    assert await retention.end_lost(store, time.time() + retention.LOST_AFTER_S + 1) == [RESOURCE.id]
    meta = layout.Meta.load(await store.get(layout.meta_key(RESOURCE.id)) or b"")
    assert meta is not None and (meta.status, meta.reason, meta.frames) == ("ended", layout.LOST, 103)
    assert meta.owned_by("ab" * 32) and meta.ended_at is not None and meta.ended_at <= time.time()
    assert await store.list(layout.LIVE) == []
    other = layout.Meta.load(await store.get(layout.meta_key(ended.id)) or b"")
    assert other is not None and (other.status, other.reason, other.frames) == ("ended", None, 3)


async def test_a_live_call_touches_its_live_entry_even_when_it_writes_no_audio(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A paused call relays no audio deltas: its writer's touch alone keeps it from being lost."""
    monkeypatch.setattr(retention, "LIVE_TOUCH_S", FLUSH_S)
    store = DirectoryStore(tmp_path)
    call = _recorder(store, GatewayStats()).open(RESOURCE, "ab" * 32, 0, lambda: None, [].append)
    await asyncio.sleep(FLUSH_S)
    first = (await store.list(layout.LIVE))[0].modified
    await asyncio.sleep(FLUSH_S * 2.5)
    assert (await store.list(layout.LIVE))[0].modified > first
    assert await store.list(layout.audio_prefix(RESOURCE.id)) == []
    call.end(ended=True)
    await call.written
