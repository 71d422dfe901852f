"""`GatewayBackend`: the pump's backend on a gateway: who may start a session, and the legs that run them.

Before a session exists the gateway speaks GPT-Live itself with the same pure `Connection` a pod
runs, validating starts against the pool's published description (`PoolView.catalog`). A valid
start that this gateway admits (not draining, the model still routed, the API key within its
`Quota`) becomes an `UpstreamLeg`, which places it and relays it with what the legs share
(`leg.Shared`: placement, the pod link, the counters); once its pod starts the session, the
socket's machine is the pump's `passthrough.Passthrough`.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Coroutine, Mapping
from typing import Any

from websockets.datastructures import Headers

from liveplex.gateway import forking
from liveplex.gateway.leg import Reattach, Shared, UpstreamLeg
from liveplex.gateway.quota import Quota
from liveplex.gateway.sessions import key_digest
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.view import PoolView
from liveplex.gptlive import connection, errors, events
from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server import auth, backend, replies
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.urls import LAST_EVENT_QUERY, REATTACH_QUERY
from liveplex.storage.store import StoreError
from liveplex.tasks import Tasks

logger = logging.getLogger(__name__)


class GatewayBackend:
    """See the module docstring."""

    def __init__(self, settings: GatewaySettings, protocol: Settings, api_keys: tuple[str, ...], view: PoolView,
                 shared: Shared) -> None:
        self.protocol = protocol
        self._api_keys = api_keys
        self._view = view
        self._shared = shared
        self._quota = Quota(settings.max_sessions_per_key, settings.starts_per_key_per_s)
        """Per-key limits, for keyed gateways only (`quota`)."""
        self._leg_keys: dict[UpstreamLeg, str] = {}
        """Each leg's API key, for the quota (a re-attach's too: `Quota.hold`)."""
        self._conn_keys: weakref.WeakKeyDictionary[connection.Connection, str] = weakref.WeakKeyDictionary()
        """The API key each socket authenticated with (for the per-key limit)."""
        self._fork_records: weakref.WeakKeyDictionary[connection.Connection, bytes] = weakref.WeakKeyDictionary()
        """A fork's stored record, read for its socket's start (`forking`)."""
        self._reading = Tasks()
        """Forks' reads of the store under way."""
        self.draining = False
        """Set by the gateway's drain: new starts are refused, relayed sessions go on."""

    # --- backend.Backend ---------------------------------------------------------------------------

    def refusal(self, headers: Headers | None = None) -> replies.Reply | None:
        return None

    def reattach(self, peer: backend.Peer, headers: Headers, query: Mapping[str, str]) -> UpstreamLeg | None:
        """`?session_id=ID[&last_event_id=E]`: the caller continues its running session on this
        socket or WebRTC call (a re-offer), wherever it was relayed before (docs/continuity.md
        "Re-attach")."""
        session_id = query.get(REATTACH_QUERY)
        if session_id is None:
            return None
        if self.draining:  # another replica may take it: the SDK retries 1001
            refusal = (errors.gateway_draining(), connection.GOING_AWAY)
        elif not events.SESSION_ID.fullmatch(session_id):
            refusal = (errors.session_not_found(session_id), connection.POLICY_VIOLATION)
        else:
            key = self._conn_keys.get(peer.conn, "")
            leg = UpstreamLeg(self._shared, Reattach(session_id, query.get(LAST_EVENT_QUERY, "")), peer, "",
                              self._leg_done, key)
            if self._api_keys:
                self._quota.hold(key)  # admitted when it started; counted here while it runs here
            self._leg_keys[leg] = key
            return leg
        self._shared.stats.reattaches["refused"] += 1
        peer.close_with(*refusal)
        return None

    @property
    def forks(self) -> bool:
        return self._shared.recorder is not None

    def fork(self, peer: backend.Peer, session_id: str, webrtc: bool = False) -> None:
        """A fork: read the stored session for the key `peer` came with, then let its start fork it."""
        recorder = self._shared.recorder
        assert recorder is not None  # `forks`
        key = self._conn_keys.get(peer.conn, "")
        read = forking.read(recorder.store, session_id, key_digest(key), webrtc)
        self._reading.spawn(self._forked(peer, read))

    async def _forked(self, peer: backend.Peer, read: Coroutine[Any, Any, forking.Stored | ProtocolError]) -> None:
        try:
            stored = await read
        except StoreError as exc:
            logger.warning("fork: the store cannot be read", extra={"error": str(exc)})
            stored = errors.server_error("the session store cannot be reached; retry.")
        if isinstance(stored, ProtocolError):
            self._shared.stats.forks["refused"] += 1
            peer.close_with(stored, connection.POLICY_VIOLATION)
            return
        self._fork_records[peer.conn] = stored.record  # its start's leg resumes it (`start`)
        peer.fork_from(stored.source)

    def park(self, peer: backend.Peer, leg: backend.Leg) -> bool:
        """A caller's socket dropped: its session ends, on its pod too, and its slot is free at
        once, as a GPT-Live server frees it (conformance check 19). What a pod keeps for a
        re-attach is a session whose gateway went away."""
        return False

    def connection(self, headers: Headers, now_ns: int, query: Mapping[str, str],
                   media: bool = False) -> connection.Connection:
        reattach = query.get(REATTACH_QUERY)  # its start is rebuilt under its own id (`UpstreamLeg`)
        conn = connection.Connection(self._view.catalog, self.protocol, now_ns,
                                     reattach if reattach and events.SESSION_ID.fullmatch(reattach) else None,
                                     media=media, stores=self._shared.recorder is not None)
        self._conn_keys[conn] = auth.upgrade_key(self._api_keys, headers) or ""
        return conn

    def start(self, start: connection.Start, peer: backend.Peer) -> UpstreamLeg | None:
        if self.draining:
            peer.refuse(errors.gateway_draining())
            return None
        pool = self._view.catalog.pool_for(start.resource.model)
        if pool is None:  # the routes changed since validation
            peer.refuse(errors.no_engines())
            return None
        key = self._conn_keys.get(peer.conn, "")
        refusal = self._quota.admit(key, time.monotonic_ns()) if self._api_keys else None
        if refusal is not None:
            self._shared.stats.rejected[(pool, "key_limit")] += 1
            peer.refuse(refusal)
            return None
        leg = UpstreamLeg(self._shared, start, peer, pool, self._leg_done, key,
                          record=self._fork_records.pop(peer.conn, None))
        self._leg_keys[leg] = key
        return leg

    # --- backend.Observer: nothing to tell, the pod settles its own reservation -----------------------

    def session_accepted(self, conn: connection.Connection, outcome: connection.Accepted) -> None:
        pass

    def session_refused(self, conn: connection.Connection, outcome: connection.Refused) -> None:
        pass

    def session_ended(self, conn: connection.Connection, outcome: connection.Ended) -> None:
        pass

    # --- the legs ---------------------------------------------------------------------------------------

    @property
    def legs(self) -> list[UpstreamLeg]:
        """The sessions placed or being placed by this process (the watchdog's round)."""
        return list(self._leg_keys)

    def leg_of(self, session_id: str) -> UpstreamLeg | None:
        """The leg relaying `session_id` here, if any (a hangup; rare, so a scan)."""
        return next((leg for leg in self._leg_keys if leg.session_id == session_id), None)

    @property
    def sessions(self) -> int:
        """Sessions placed or being placed by this process."""
        return len(self._leg_keys)

    def _leg_done(self, leg: UpstreamLeg) -> None:
        key = self._leg_keys.pop(leg, None)
        if key is not None and self._api_keys:
            self._quota.release(key)
