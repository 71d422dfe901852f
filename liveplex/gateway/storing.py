"""Stored calls (`store: true`, docs/storage.md): the gateway writes what each one is made of
while it runs: its recording, its relayed events, its settings and its resume record.

The gateway is the natural writer: it relays every frame of the call both ways and already holds
its resume record (`relaying.Relaying.record`). The per-frame cost is one list append
(`StoredCall.up`, `down`): frames are kept as the relay had them, and every `flush_s` one task
per call mixes them into the recording (`storage.recording.Mixer`) and writes the chunks
(`storage.layout`) in the background. So a gateway lost mid-call loses at most the last
`flush_s` (plus one write's time) of the recording; the pod's own checkpoints and the caller's
re-attach carry the call on, and its next gateway continues the recording from the frame it
resumes at. Every `retention.LIVE_TOUCH_S` a flush also rewrites the call's `live/<id>`: a call
that stops doing so without its end was lost, and the sweep marks it so (`retention.end_lost`).

A store that fails (down, refused, out of space) or falls behind (`MAX_PENDING_BYTES` waiting)
never touches the call: storing stops for that call, its caller gets one `info`
`store_unavailable` event, and `liveplex_gateway_stored_sessions_total{result="failed"}` counts it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive import events
from liveplex.storage import layout, retention
from liveplex.storage.recording import Mixer
from liveplex.storage.settings import StoreSettings
from liveplex.storage.store import ObjectStore, StoreError

logger = logging.getLogger(__name__)

MAX_PENDING_BYTES = 8 << 20
"""Relayed frames a stored call may hold for its next write, audio and events alike (≈60 s of
24 kHz audio both ways, in base64): a store slower than that is as good as down for this call."""
STORE_UNAVAILABLE = "store_unavailable"
"""The `info` code a stored call's caller gets when storing stops before the call's end."""
_UP: Literal[0] = 0
_DOWN: Literal[1] = 1
_EVENT: Literal[2] = 2


class Recorder:
    """A gateway's stored calls: the store, its settings, the counters; sweeps retention."""

    def __init__(self, store: ObjectStore, settings: StoreSettings, stats: GatewayStats) -> None:
        self.store = store
        self.settings = settings
        self._stats = stats
        self._calls: set[StoredCall] = set()

    def open(self, resource: events.SessionResource, key_digest: str, first_frame: int,
             record: Callable[[], bytes | bytearray | None], notify: Callable[[str], None],
             client: dict[str, Any] | None = None) -> StoredCall:
        """Start storing the call `resource` describes (from `first_frame`: a re-attached call's
        frame count); `record`: its resume record so far; `notify`: sends the caller an event."""
        call = StoredCall(self, resource, key_digest, first_frame, record, notify, client)
        self._calls.add(call)
        return call

    def closed(self, call: StoredCall, result: str, written: int) -> None:
        """`call`'s writer is done: `result` (a `GatewayStats.stored` label), `written` bytes."""
        self._calls.discard(call)
        self._stats.stored[result] += 1
        self._stats.stored_bytes += written

    def expires_on(self, unix_s: float) -> str | None:
        days = self.settings.retention_days
        if days == 0:
            return None
        day = datetime.datetime.fromtimestamp(unix_s, datetime.UTC).date() + datetime.timedelta(days=days)
        return day.isoformat()

    async def run(self) -> None:
        """Delete the sessions past their retention, and mark the calls lost as ended, every
        `sweep_s`, until cancelled."""
        while True:
            try:
                await retention.sweep(self.store, datetime.datetime.now(datetime.UTC).date())
                await retention.end_lost(self.store, time.time())
            except StoreError as exc:
                logger.warning("retention sweep failed", extra={"store": self.store.describe, "error": str(exc)})
            await asyncio.sleep(self.settings.sweep_s)

    async def close(self) -> None:
        """Write what the calls still hold (the gateway stops), then let go of the store."""
        calls = list(self._calls)
        for call in calls:
            call.end(ended=False)
        await asyncio.gather(*(call.written for call in calls), return_exceptions=True)
        await self.store.close()


class StoredCall:
    """One stored call's writer; see the module docstring. The relay calls `up`, `down` and
    `event` (the hot path: an append), and `end` once."""

    def __init__(self, recorder: Recorder, resource: events.SessionResource, key_digest: str, first_frame: int,
                 record: Callable[[], bytes | bytearray | None], notify: Callable[[str], None],
                 client: dict[str, Any] | None = None) -> None:
        self._recorder = recorder
        self._client = client
        """A WebRTC call's `session.client` (its data channel's permissions): kept with its
        settings, for a fork to inherit."""
        self._store = recorder.store
        self._resource = resource
        self._key = key_digest
        self._record = record
        self._notify = notify
        self._mixer = Mixer(resource.format, first_frame)
        self._pending: list[str | bytes] = []
        self._kinds = bytearray()
        """`_pending`'s kinds (`_UP`, `_DOWN`, `_EVENT`), one byte each: no object a frame (a tuple
        would be one more the collector tracks, held for a flush period)."""
        self._pending_bytes = 0
        self._record_written = 0
        self._record_base = 0
        """Where this writer's record goes on in the stored one: after what an earlier writer of the
        same session stored (a re-attach's record starts anew with a head, `hop.CHECKPOINT`, so the
        stored record is the old one then the new: a resume or fork reads from its last head)."""
        self._written = 0
        self._touch_at = 0.0
        """When `_flush` next rewrites the call's `live/<id>` (loop time): its proof of life."""
        self._degraded: str | None = None
        """Why storing stopped before the call's end (it failed), for its meta (`Meta.degraded`)."""
        self._on = True
        """Still storing: false once ended or failed (the hot path then appends nothing)."""
        self._ended: bool | None = None
        """Set by `end`: True, the call ended; False, it goes on elsewhere (handed back)."""
        self._wake = asyncio.Event()
        self.written: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._run())
        """Done once everything is written (or storing failed)."""

    # --- the relay's side (per frame) --------------------------------------------------------------

    def up(self, data: str | bytes) -> None:
        """A client frame on its way to the pod."""
        if self._on:
            self._keep(data, _UP)

    def down(self, message: str) -> None:
        """An audio delta on its way to the caller."""
        if self._on:
            self._keep(message, _DOWN)

    def _keep(self, data: str | bytes, kind: int) -> None:
        """A frame for the next flush, its bytes counted toward `MAX_PENDING_BYTES`."""
        self._pending.append(data)
        self._kinds.append(kind)
        self._pending_bytes += len(data)
        if self._pending_bytes > MAX_PENDING_BYTES:
            self._fail("the store fell behind the call")

    def event(self, text: str) -> None:
        """A relayed event (not audio), counted as audio is: a call of long transcripts (or any
        mix) holds no more than `MAX_PENDING_BYTES` for a store that fell behind."""
        if self._on:
            self._keep(text, _EVENT)

    def end(self, ended: bool) -> None:
        """The relay let go of the call: `ended` (its meta says so), or it goes on elsewhere (a
        re-attach continues storing it). What is buffered is written."""
        if self._ended is None:
            self._ended = ended
            self._wake.set()

    # --- the writer (a task) ------------------------------------------------------------------------

    async def _run(self) -> None:
        session_id = self._resource.id
        meta: layout.Meta | None = None
        try:
            meta = await self._meta()
            first = [(layout.meta_key(session_id), meta.dump()), self._touch()]
            if meta.expires_on is not None:
                first.append((layout.expiry_key(datetime.date.fromisoformat(meta.expires_on), session_id), b""))
            await self._put_many(first)
            while self._ended is None and self._on:
                try:
                    await asyncio.wait_for(self._wake.wait(), self._recorder.settings.flush_s)
                except TimeoutError:
                    pass
                await self._flush()
            if self._on:
                await self._flush()
                if self._ended:
                    meta = dataclasses.replace(meta, status="ended", frames=self._mixer.frame,
                                               ended_at=int(time.time()))
                    await self._put_many([(layout.meta_key(session_id), meta.dump())])
                    await self._store.delete([layout.live_key(session_id)])
        except StoreError as exc:
            self._fail(str(exc))
        finally:
            self._on = False
            self._pending.clear()
            self._kinds.clear()
        if self._degraded is not None and meta is not None:
            await self._say_degraded(meta, self._degraded)
        self._recorder.closed(self, "complete" if self._degraded is None else "failed", self._written)

    async def _say_degraded(self, meta: layout.Meta, why: str) -> None:
        """Storing stopped early: the meta says why, once, if the store takes it (fallen behind, or
        up again); the call's `live/` entry is no longer touched, so the sweep ends it as lost and
        keeps the reason (`retention.end_lost`)."""
        try:
            await self._put_many([(layout.meta_key(meta.session_id), dataclasses.replace(meta, degraded=why).dump())])
        except StoreError as exc:
            logger.info("stored call's meta not marked degraded", extra={
                "session_id": meta.session_id, "error": str(exc)})

    async def _meta(self) -> layout.Meta:
        """The call's meta: as stored already when a re-attach continues it (its owner checked by
        the re-attach), else new."""
        session_id = self._resource.id
        known = await self._store.get(layout.meta_key(session_id))
        old = None if known is None else layout.Meta.load(known)
        if old is not None and old.owned_by(self._key):
            self._record_base = layout.record_end(await self._store.list(layout.record_prefix(session_id)))
            return layout.Meta(session_id, old.key, old.created_at, old.expires_on, old.session)
        now = time.time()
        session = events.resource_json(self._resource)
        if self._client is not None:
            session["client"] = self._client
        return layout.Meta(session_id, self._key, int(now), self._recorder.expires_on(now), session)

    async def _flush(self) -> None:
        """Mix what the relay kept since the last flush and write it: the recording's chunk, the
        events', and the resume record's growth."""
        pending, kinds = self._pending, self._kinds
        self._pending, self._kinds, self._pending_bytes = [], bytearray(), 0
        mixer = self._mixer
        for kind, data in zip(kinds, pending, strict=True):
            if kind == _DOWN:
                mixer.agent(data if isinstance(data, str) else data.decode())
            elif kind == _UP:
                mixer.caller(data)
            else:
                mixer.event(data if isinstance(data, str) else data.decode())
        frame, pcm, lines = mixer.take()
        session_id = self._resource.id
        items: list[tuple[str, bytes]] = []
        if pcm:
            items.append((layout.audio_key(session_id, frame), pcm))
        if lines:
            items.append((layout.events_key(session_id, frame), lines))
        record = self._record()
        written = self._record_written
        end = written if record is None else len(record)  # the relay appends on while this writes
        if record is not None and end > written:
            items.append((layout.record_key(session_id, self._record_base + written), bytes(record[written:end])))
        if asyncio.get_running_loop().time() >= self._touch_at:
            items.append(self._touch())
        if items:
            await self._put_many(items)
        self._record_written = end

    def _touch(self) -> tuple[str, bytes]:
        """The call's `live/<id>` entry, due again in `retention.LIVE_TOUCH_S`."""
        self._touch_at = asyncio.get_running_loop().time() + retention.LIVE_TOUCH_S
        return layout.live_key(self._resource.id), b""

    async def _put_many(self, items: list[tuple[str, bytes]]) -> None:
        await self._store.put_many(items)
        self._written += sum(len(data) for _, data in items)

    def _fail(self, why: str) -> None:
        """Storing stops for this call (once): the caller is told, the log and the counter say why."""
        if self._degraded is not None:
            return
        self._degraded = why
        self._on = False
        self._pending.clear()
        self._kinds.clear()
        self._pending_bytes = 0
        self._wake.set()
        logger.warning("stored call no longer stored", extra={
            "session_id": self._resource.id, "store": self._store.describe, "error": why})
        if self._ended is None:
            self._notify(events.dump(events.Info(
                STORE_UNAVAILABLE, "This session can no longer be stored: the recording and the stored session "
                "end here, and the call goes on unstored.")))
