"""`UpstreamLeg`: one client session placed on a pod and relayed to it verbatim (platform §7.3-§7.9).

One task per session: place (through `GatewayBackend.place`), dial the pod with the session id,
forward the client's `session.start` text, and read the answer. `session.started` hands the client
socket over (`Connection.handed_off`): from then on frames are copied both ways without JSON
parsing the audio (upstream frames starting with `AUDIO_PREFIX` are relayed as they are; only the
rare others are parsed to learn the session's end). `server_busy` or a failed connect places once
more elsewhere; the pod vanishing mid-session is `server_error` + `session.closed`
`connection_lost` + 1011 to the client, and trips that pod's breaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

import orjson
import websockets
from websockets.asyncio.client import ClientConnection, connect

from liveplex.gptlive import connection, errors, events
from liveplex.gptlive.server import backend
from liveplex.placement import Busy, Placed

if TYPE_CHECKING:
    from liveplex.gateway.backend import GatewayBackend

logger = logging.getLogger(__name__)

AUDIO_PREFIX = '{"type":"session.output_audio.delta"'
"""liveplex servers write `type` first (`events.dump`), so one prefix test finds the audio path."""

SESSION_ID_HEADER = "X-Liveplex-Session-Id"
POOL_HEADER = "X-Liveplex-Pool"
PLACEMENTS = 2
"""platform §7.5: a busy or unreachable pod is excluded and the session placed once more."""
BUSY_RECHECK_S = 0.1
"""A pool that looks full is asked once more after this: a session that just ended reaches the
client (through this gateway) a moment before its pod's count reaches Redis."""


def _kind(text: str | bytes) -> tuple[str, dict[str, object]]:
    """The `type` of a rare upstream event and its body ("" when unreadable)."""
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "", {}
    if not isinstance(body, dict):
        return "", {}
    return str(body.get("type", "")), body


class UpstreamLeg:
    """See the module docstring; the pump calls `forward` and `release`."""

    def __init__(self, owner: GatewayBackend, start: connection.Start, peer: backend.Peer,
                 pool: str) -> None:
        self._owner = owner
        self._start = start
        self._peer = peer
        self._pool = pool
        self._outbox: deque[str | bytes] = deque()
        self._wake = asyncio.Event()
        self._frames = 0
        self._pod: str | None = None
        self._released = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    # --- the pump's side ----------------------------------------------------------------------------

    def append(self, pcm: bytes) -> None:
        raise RuntimeError("a relayed session's audio is forwarded as the client sent it")

    def forward(self, data: str | bytes) -> None:
        if len(self._outbox) >= self._owner.settings.upstream_queue_frames:
            logger.warning("upstream too slow; dropping the session", extra={"pod": self._pod})
            self._peer.perform(self._peer.conn.relay_lost(self._frames))
            return
        self._outbox.append(data)
        self._wake.set()

    def hangup(self) -> None:
        """Never asked: a relayed session's `session.close` is forwarded to the pod."""

    def release(self) -> None:
        self._released = True
        self._task.cancel()

    # --- the session's task -------------------------------------------------------------------------

    async def _run(self) -> None:
        ws: ClientConnection | None = None
        try:
            ws = await self._place_and_start()
            if ws is not None:
                self._owner.relaying(self._pool, +1)
                await self._relay(ws)
        except asyncio.CancelledError:
            if not self._released:
                raise
        except Exception:
            logger.error("relay failed", exc_info=True)
            if not self._released:
                self._lost()
        finally:
            if self._pod is not None:
                self._owner.relaying(self._pool, -1)
            self._owner.leg_done(self)
            if ws is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(1):
                        await ws.close()

    async def _place_and_start(self) -> ClientConnection | None:
        """Place, dial, start; on failure tell the client (busy, the pod's refusal, or
        server_error) and return None."""
        peer, start, owner = self._peer, self._start, self._owner
        started_ns = time.monotonic_ns()
        exclude: set[str] = set(owner.tripped())
        busy_text: str | None = None
        unreachable = False
        for attempt in range(PLACEMENTS):
            placed = await owner.place(self._pool, start.resource.id, exclude)
            if isinstance(placed, Busy) and not placed.no_engines and attempt == 0:
                await asyncio.sleep(BUSY_RECHECK_S)
                placed = await owner.place(self._pool, start.resource.id, exclude)
            if isinstance(placed, Busy):
                if busy_text is not None:
                    break
                owner.refused(self._pool, placed)
                if unreachable:
                    peer.perform(peer.conn.rejected(errors.server_error("no engine could be reached")))
                elif placed.no_engines:
                    peer.perform(peer.conn.rejected(errors.no_engines()))
                else:
                    peer.perform(peer.conn.rejected(errors.server_busy(placed.total_capacity)))
                return None
            ws = await self._dial(placed)
            first = None if ws is None else await self._first(ws, placed)
            if ws is None or first is None:
                unreachable = True
                exclude.add(placed.pod)
                continue
            text = first if isinstance(first, str) else first.decode(errors="replace")
            kind, body = _kind(text)
            if kind == "session.started":
                owner.placed(self._pool, started_ns, retried=attempt > 0)
                self._pod = placed.pod
                session = body.get("session")
                expires = session.get("expires_at") if isinstance(session, dict) else None
                peer.relay(text, False)
                peer.perform(peer.conn.handed_off(expires if isinstance(expires, int) else None))
                return ws
            await ws.close()
            error = body.get("error")
            if kind == "error" and isinstance(error, dict) and error.get("code") == "server_busy":
                busy_text = text
                exclude.add(placed.pod)
                continue
            peer.relay(text, False)  # any other refusal is the pod's answer to the client's start
            peer.perform(peer.conn.rejected(None))
            return None
        if busy_text is not None:  # the pod's own words, with the client's event id
            owner.refused(self._pool, Busy(0, 0, no_engines=False))
            peer.relay(busy_text, False)
            peer.perform(peer.conn.rejected(None))
        else:
            peer.perform(peer.conn.rejected(errors.server_error("no engine could be reached")))
        return None

    async def _dial(self, placed: Placed) -> ClientConnection | None:
        """Connect to the pod within the budget; a failure gives back the reservation and trips
        the pod's breaker."""
        try:
            return await connect(
                f"ws://{placed.addr}/v1/live/sessions",
                additional_headers={SESSION_ID_HEADER: self._start.resource.id, POOL_HEADER: self._pool},
                open_timeout=self._owner.settings.connect_timeout_ms / 1000, max_size=events.MAX_MESSAGE_BYTES,
                compression=None, ping_interval=None)
        except (OSError, TimeoutError, websockets.InvalidHandshake, websockets.InvalidURI):
            await self._owner.unreachable(self._pool, placed, self._start.resource.id)
            return None

    async def _first(self, ws: ClientConnection, placed: Placed) -> str | bytes | None:
        """Forward the start and read the pod's answer; None if the pod hung up first."""
        try:
            await ws.send(self._start.text)
            async with asyncio.timeout(self._owner.protocol.start_timeout_ms / 1000):
                return await ws.recv()
        except (websockets.ConnectionClosed, TimeoutError):
            await ws.close()
            await self._owner.unreachable(self._pool, placed, self._start.resource.id)
            return None

    async def _relay(self, ws: ClientConnection) -> None:
        async with asyncio.TaskGroup() as group:
            writer = group.create_task(self._write(ws))
            try:
                await self._read(ws)
            finally:
                writer.cancel()

    async def _read(self, ws: ClientConnection) -> None:
        peer, stats = self._peer, self._owner.stats
        try:
            async for message in ws:
                if type(message) is str and message.startswith(AUDIO_PREFIX):
                    self._frames += 1
                    stats.frames_down += 1
                    peer.relay(message, True)
                    continue
                text = message if isinstance(message, str) else message.decode()
                peer.relay(text, False)
                kind, body = _kind(text)
                if kind == "session.closed":
                    reason = body.get("reason")
                    self._released = True  # the pump releases this leg now: a finished session
                    peer.perform(peer.conn.relay_ended(str(reason), self._frames))
                    return
        except websockets.ConnectionClosedError:
            pass
        self._lost()

    def _lost(self) -> None:
        """The pod went away mid-session (platform §7.8)."""
        if self._pod is not None:
            self._owner.lost(self._pod)
        self._released = True
        self._peer.perform(self._peer.conn.relay_lost(self._frames))

    async def _write(self, ws: ClientConnection) -> None:
        stats = self._owner.stats
        while True:
            while self._outbox:
                await ws.send(self._outbox.popleft())
                stats.frames_up += 1
            self._wake.clear()
            await self._wake.wait()
