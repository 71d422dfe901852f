"""Deleting stored sessions: one session (`delete_session`), and the sweep that deletes those
past their retention (`sweep`), which every gateway runs every `StoreSettings.sweep_s`.

A session writes `expiry/<last day>/<id>` at its start (`layout.expiry_key`), so a sweep lists
only the days that are over, not every object in the store. Replicas sweeping at once delete the
same objects twice, which is no error.
"""

from __future__ import annotations

import datetime
import logging

from liveplex.storage import layout
from liveplex.storage.store import ObjectStore

logger = logging.getLogger(__name__)


async def delete_session(store: ObjectStore, session_id: str) -> int:
    """Delete everything a stored session is made of; the number of objects deleted."""
    entries = await store.list(layout.session_prefix(session_id))
    keys = [entry.key for entry in entries]
    meta = layout.meta_key(session_id)
    if meta in keys:  # last: a session half deleted is still found, and deleted again
        keys.remove(meta)
        keys.append(meta)
    await store.delete(keys)
    return len(keys)


async def sweep(store: ObjectStore, today: datetime.date) -> list[str]:
    """Delete every session whose last day is before `today`; their ids. Raises `StoreError`."""
    swept: list[str] = []
    for entry in await store.list(layout.EXPIRY):
        parts = entry.key.split("/")
        if len(parts) != 3:
            continue
        try:
            day = datetime.date.fromisoformat(parts[1])
        except ValueError:
            continue
        if day >= today:
            continue
        await delete_session(store, parts[2])
        await store.delete([entry.key])
        swept.append(parts[2])
    if swept:
        logger.info("stored sessions past their retention deleted", extra={"sessions": len(swept)})
    return swept
