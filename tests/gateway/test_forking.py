"""What a fork reads from the store (`gateway.forking.read`): the stored settings less what named the
stored session alone, and its record, in order; nothing for another key, an unknown or malformed
id (one `session_not_found`), and a session with no record yet is still starting."""

from __future__ import annotations

from pathlib import Path

from liveplex.gateway import forking
from liveplex.gateway.sessions import key_digest
from liveplex.gptlive import errors
from liveplex.storage import layout
from liveplex.storage.directory import DirectoryStore

RESOURCE = {"id": "sess_a", "status": "active", "expires_at": 1, "model": "gpt-live-1", "instructions": "Hi",
            "audio": {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": "NATF2"}}, "store": True,
            "client": {"data_channel": {"allowed_server_events": ["session.started"]}}}


async def test_a_fork_reads_the_stored_settings_and_record_for_its_key_only(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    await store.put(layout.meta_key("sess_a"), layout.Meta("sess_a", key_digest("k"), 0, None, RESOURCE).dump())

    async def code(session_id: str, key: str = "k") -> tuple[str, str | None]:
        read = await forking.read(store, session_id, key_digest(key), webrtc=False)
        assert isinstance(read, errors.ProtocolError)
        return read.code.value, errors.render_path(read.param)

    assert await code("sess_a") == ("invalid_value", "session_id")  # no record yet: still starting
    await store.put_many([(layout.record_key("sess_a", 0), b"H12"), (layout.record_key("sess_a", 3), b"T4")])
    read = await forking.read(store, "sess_a", key_digest("k"), webrtc=True)
    assert isinstance(read, forking.Stored)
    assert read.record == b"H12T4"
    assert read.source.settings == {k: v for k, v in RESOURCE.items() if k not in ("id", "status", "expires_at",
                                                                                 "client")}
    assert read.source.client == RESOURCE["client"]  # the call reads it: a start may not carry it
    assert (read.source.session_id, read.source.webrtc) == ("sess_a", True)
    for other in (("sess_a", "other"), ("sess_b", "k"), ("../sess_a", "k")):
        assert await code(*other) == ("session_not_found", "session_id")
