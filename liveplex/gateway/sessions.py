"""`SessionHolders`: where each relayed session runs and who may re-attach to it, in Redis
(`keys.SESSION_PREFIX`), so that a caller whose gateway died or rolled finds its call again through
any replica (docs/continuity.md "Re-attach").

A gateway records a session once its pod started it (and again after a move or a resume: its new
pod), and forgets it when the session ends. It does not forget it when it lets go of the session
without its end (the caller's socket dropped, the gateway is stopping), nor, of course, when it is
killed: the pod then parks the session for its grace window, and the record leads the caller's
next gateway to it. The record holds the pod, the pool, a SHA-256 of the caller's API key (never
the key) and the client's `session.start`, from which the next gateway rebuilds exactly the
session's resource, as it validated it at the start. A start over `MAX_START_BYTES` (a long
history) is not recorded: that session cannot be re-attached, and the log says so.

Redis down: the session goes on; a record not written means no re-attach, and it is logged.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import orjson

from liveplex.gateway.calls import HOLD_TTL_S
from liveplex.placement import PlacementClient
from liveplex.placement.errors import PlacementError
from liveplex.tasks import Tasks

logger = logging.getLogger(__name__)

MAX_START_BYTES = 64 << 10
"""The largest `session.start` kept for a re-attach: any instructions, and a long history."""


def key_digest(key: str) -> str:
    """What a record keeps of the API key that started the session."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Held:
    """One relayed session's record."""

    pod: str
    addr: str
    pool: str
    key: str
    """`key_digest` of the API key the session was started with ("" hashed when keyless)."""
    start: str
    """The client's `session.start`, as it sent it."""
    peer: str = ""
    """The `--peer-url` of the gateway relaying it (a hangup reaching another replica is relayed
    there); "": unknown (one replica, or a record from before it was kept)."""

    def belongs_to(self, key: str) -> bool:
        return hmac.compare_digest(self.key, key_digest(key))

    def dump(self) -> str:
        return orjson.dumps({"pod": self.pod, "addr": self.addr, "pool": self.pool, "key": self.key,
                             "start": self.start, "peer": self.peer}).decode()

    @staticmethod
    def load(text: str) -> Held | None:
        """A record as `dump` wrote it; None for anything else."""
        try:
            raw = orjson.loads(text)
            pod, addr, pool, key, start = (str(raw[name]) for name in ("pod", "addr", "pool", "key", "start"))
            return Held(pod, addr, pool, key, start, str(raw.get("peer", "")))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None


class SessionHolders:
    """See the module docstring."""

    def __init__(self, client: PlacementClient) -> None:
        self._client = client
        self._writes = Tasks()

    def hold(self, session_id: str, held: Held) -> None:
        """Record `held` (in the background: the session goes on meanwhile)."""
        if len(held.start) > MAX_START_BYTES:
            logger.warning("session start too large to record; it cannot be re-attached",
                           extra={"session_id": session_id, "bytes": len(held.start)})
            return
        self._spawn(self._client.hold_session(session_id, held.dump(), HOLD_TTL_S), session_id, "recorded")

    async def holder(self, session_id: str) -> Held | None:
        try:
            text = await self._client.session_holder(session_id)
        except PlacementError as exc:
            logger.warning("session record unreadable", extra={"session_id": session_id, "error": str(exc)})
            return None
        return None if text is None else Held.load(text)

    def forget(self, session_id: str) -> None:
        self._spawn(self._client.forget_session(session_id), session_id, "forgotten")

    def _spawn(self, write: Coroutine[Any, Any, None], session_id: str, what: str) -> None:
        async def run() -> None:
            try:
                await write
            except PlacementError as exc:
                logger.warning(f"session record not {what}", extra={"session_id": session_id, "error": str(exc)})

        self._writes.spawn(run())
