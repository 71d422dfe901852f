"""What a fork reads from the store before it starts (docs/storage.md "Forks").

A fork continues a stored session's conversation as a new session: its settings are the stored
session's (`Meta.session`, as its `session.started` gave them, less what names that one session)
and its state is the stored resume record, which a pod rebuilds it from as it resumes a session
whose pod died (`hop.RESUME_PATH`). Both are read here, for the API key that asks, before the
fork's `session.start` is taken: a socket's fork reads them as it opens, a WebRTC fork before its
offer is answered. What is read is the store's: a fork of a call still running starts from what
its gateway wrote so far (all but its last `--store-flush-s`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from liveplex.gptlive import errors, events, fork
from liveplex.gptlive.errors import ProtocolError
from liveplex.storage import layout
from liveplex.storage.store import ObjectStore

NOT_STARTED = ("id", "status", "expires_at", "client")
"""What the stored session says that a fork's `session.start` does not carry: what named that one
session (a fork has its own), and a WebRTC call's `client`, which its call reads (`Source.client`)."""


@dataclass(frozen=True, slots=True)
class Stored:
    """A stored session, read for a fork: its settings and its resume record."""

    source: fork.Source
    record: bytes


def settings_of(resource: dict[str, Any]) -> dict[str, Any]:
    """A stored session's `session.start` settings from its resource: model, instructions, audio
    format and voice, delegation, safety identifier and `store`, as the session ran with them."""
    return {key: value for key, value in resource.items() if key not in NOT_STARTED}


async def read(store: ObjectStore, session_id: str, key_digest: str, webrtc: bool) -> Stored | ProtocolError:
    """The stored session `session_id` of the API key `key_digest`, for a fork over `webrtc` or a
    socket; an unknown, unstored, deleted or another key's session is `stored_session_not_found`,
    one whose record holds nothing yet (it is still starting) `stored_session_starting`. Raises
    `StoreError` when the store cannot be read."""
    if not events.SESSION_ID.fullmatch(session_id):
        return errors.stored_session_not_found(session_id)
    known = await store.get(layout.meta_key(session_id))
    meta = None if known is None else layout.Meta.load(known)
    if meta is None or not meta.owned_by(key_digest):
        return errors.stored_session_not_found(session_id)
    entries = await store.list(layout.record_prefix(session_id))
    chunks = await asyncio.gather(*(store.get(entry.key) for entry in entries))  # one round trip, not one a chunk
    record = b"".join(chunk for chunk in chunks if chunk is not None)
    if not record:
        return errors.stored_session_starting(session_id)
    client = meta.session.get("client")
    return Stored(fork.Source(session_id, settings_of(meta.session), webrtc,
                              client if isinstance(client, dict) else None), record)
