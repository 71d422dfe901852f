"""`CallHolders`: which gateway replica holds each WebRTC call, in Redis (`keys.CALL_PREFIX`).

A call's media ends at the replica whose create answered the offer; its sideband may reach any
replica behind the Service. Each replica records its calls under its `--peer-url` before the
create is answered and forgets them at their end; another replica relays an attach there
(`webrtc.forward`). A record outlives a crashed replica for at most `HOLD_TTL_S` (a day, a
session's longest); an attach meanwhile finds the holder gone and is answered 404. Redis down: the
call goes on, only a sideband reaching another replica is refused (404), and it is logged.
"""

from __future__ import annotations

import logging

from liveplex.gptlive.server.tls import Tls
from liveplex.placement import PlacementClient
from liveplex.placement.errors import PlacementError
from liveplex.tasks import Tasks

logger = logging.getLogger(__name__)

HOLD_TTL_S = 86_400
"""How long a record (this one, a session's in `sessions`) outlives a crashed gateway: a session's longest."""


class CallHolders:
    """`forward.Holders` over the placement Redis."""

    def __init__(self, client: PlacementClient, url: str, tls: Tls | None = None) -> None:
        self._client = client
        self.url = url
        self.tls = tls
        self._forgetting = Tasks()

    async def hold(self, session_id: str) -> None:
        try:
            await self._client.hold_call(session_id, self.url, HOLD_TTL_S)
        except PlacementError as exc:
            logger.warning("webrtc call not recorded; a sideband at another replica will not find it",
                           extra={"session_id": session_id, "error": str(exc)})

    async def holder(self, session_id: str) -> str | None:
        try:
            return await self._client.call_holder(session_id)
        except PlacementError as exc:
            logger.warning("webrtc call holder unknown", extra={"session_id": session_id, "error": str(exc)})
            return None

    def forget(self, session_id: str) -> None:
        self._forgetting.spawn(self._forget(session_id))

    async def _forget(self, session_id: str) -> None:
        try:
            await self._client.forget_call(session_id)
        except PlacementError as exc:
            logger.warning("webrtc call record left to expire", extra={"session_id": session_id, "error": str(exc)})
