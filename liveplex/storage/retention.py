"""Deleting stored sessions: one session (`delete_session`), and the sweep that deletes those
past their retention (`sweep`), which every gateway runs every `StoreSettings.sweep_s`, with the
one that settles the calls lost (`end_lost`).

A session writes `expiry/<last day>/<id>` at its start (`layout.expiry_key`), so a sweep lists
only the days that are over, not every object in the store. Replicas sweeping at once delete the
same objects twice, which is no error.

A call whose gateway died, and whose caller never re-attached through another, never writes its
end: its meta would say `live` for ever. Its writer proves it alive by rewriting `live/<id>`
(`layout.live_key`) every `LIVE_TOUCH_S`, paused calls too (they write no audio); an entry older
than `LOST_AFTER_S` outlived any re-attach, so its meta becomes `ended`, `reason` `lost`, with the
frames stored. The store's own clock dates the entries, and no Redis record is asked: a session's
record outlives a crashed gateway for a day (`gateway.calls.HOLD_TTL_S`), so it cannot tell.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging

from liveplex.storage import layout
from liveplex.storage.store import ObjectStore

logger = logging.getLogger(__name__)

LIVE_TOUCH_S = 60.0
"""How often a stored call's writer rewrites its `live/<id>` (at its next flush)."""
LOST_AFTER_S = 600.0
"""A `live/<id>` untouched this long is a call lost: longer than a pod's longest re-attach grace
(`pod.settings.MAX_REATTACH_GRACE_S`, 300 s: the call is gone from its pod by then) plus a touch
period and a flush (`--store-flush-s`, at most 60 s), with minutes to spare for clocks."""


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


async def end_lost(store: ObjectStore, now: float) -> list[str]:
    """Mark every call lost by `now` (Unix seconds; see the module docstring) as ended, its
    `ended_at` its last touch, and drop its live entry; their ids. Raises `StoreError`."""
    lost: list[str] = []
    for entry in await store.list(layout.LIVE):
        session_id = entry.key.removeprefix(layout.LIVE)
        if "/" in session_id or now - entry.modified <= LOST_AFTER_S:
            continue
        known = await store.get(layout.meta_key(session_id))
        meta = None if known is None else layout.Meta.load(known)
        if meta is not None and meta.status == "live":
            frames = layout.frames_stored(await store.list(layout.audio_prefix(session_id)))
            ended = dataclasses.replace(meta, status="ended", frames=frames, ended_at=int(entry.modified),
                                        reason=layout.LOST)
            await store.put(layout.meta_key(session_id), ended.dump())
            lost.append(session_id)
        await store.delete([entry.key])
    if lost:
        logger.info("stored calls lost marked ended", extra={"sessions": len(lost)})
    return lost
