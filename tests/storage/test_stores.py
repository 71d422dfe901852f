"""Both backends keep the one `ObjectStore` contract: whole objects by key, listed sorted by key
under a prefix with when each was written, deleted (a missing key no error), a missing object
None; a store that cannot be reached fails with `StoreError`, never another exception. The S3
backend runs against moto's real S3 server over HTTP (its signing, listing and errors as a real
store answers them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from liveplex.storage.directory import DirectoryStore
from liveplex.storage.s3 import S3Store
from liveplex.storage.store import Entry, ObjectStore, StoreError
from tests.support import s3
from tests.support.pods import free_port

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["directory", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ObjectStore]:
    if request.param == "directory":
        yield DirectoryStore(tmp_path / "store")
        return
    request.getfixturevalue("s3_credentials")
    running: s3.S3 = request.getfixturevalue("s3_server")
    made = S3Store(running.bucket(), running.endpoint, prefix="calls")
    yield made
    await made.close()


async def test_objects_are_kept_listed_and_deleted_by_key(store: ObjectStore) -> None:
    assert await store.get("sessions/a/meta.json") is None
    before = time.time()
    await store.put("sessions/a/audio/0000000010.pcm", b"late")
    await store.put("sessions/a/audio/0000000000.pcm", b"early!")
    await store.put("sessions/a/meta.json", b"{}")
    await store.put("sessions/ab/meta.json", b"other")
    await store.put("sessions/a/meta.json", b'{"v": 2}')  # replaced whole
    assert await store.get("sessions/a/meta.json") == b'{"v": 2}'
    assert await store.list("sessions/a/audio/") == [Entry("sessions/a/audio/0000000000.pcm", 6),
                                                     Entry("sessions/a/audio/0000000010.pcm", 4)]
    assert all(before - 2 <= e.modified <= time.time() + 2 for e in await store.list("sessions/"))  # 1 s clocks
    assert [e.key for e in await store.list("sessions/a/")] == [
        "sessions/a/audio/0000000000.pcm", "sessions/a/audio/0000000010.pcm", "sessions/a/meta.json"]
    await store.delete(["sessions/a/audio/0000000000.pcm", "sessions/a/never-written"])
    assert [e.key for e in await store.list("sessions/")] == [
        "sessions/a/audio/0000000010.pcm", "sessions/a/meta.json", "sessions/ab/meta.json"]
    assert await store.list("nothing/") == []


async def test_a_store_that_cannot_be_reached_fails_with_a_store_error(s3_credentials: None, tmp_path: Path) -> None:
    down = S3Store("liveplex-nowhere", f"http://127.0.0.1:{free_port()}")
    for call in (down.put("k", b"x"), down.get("k"), down.list("p/"), down.delete(["k"])):
        with pytest.raises(StoreError):
            await asyncio.wait_for(call, 30)
    blocked = tmp_path / "file"
    blocked.write_text("a file where the store's directory should be")
    with pytest.raises(StoreError):
        await DirectoryStore(blocked).put("sessions/a/meta.json", b"{}")
    with pytest.raises(StoreError):
        await DirectoryStore(tmp_path).put("../escape", b"{}")
