"""`GatewayBackend`: the gateway's live sockets over placement and upstream relays.

Before a session exists the gateway speaks GPT-Live itself with the same pure `Connection` a pod
runs, validating starts against the pool's published description (`PoolView.catalog`). A valid
start becomes an `UpstreamLeg`; once its pod starts the session, the socket's machine is the
pump's `relayed.Relayed`. This module owns what the legs share: placement with its Redis
fallback (platform §7.12), the breakers, per-key session counts and the counters.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
import weakref
from collections.abc import Mapping
from typing import Any

import httpx
from websockets.datastructures import Headers

from liveplex.gateway import upstream
from liveplex.gateway.breaker import Breaker
from liveplex.gateway.quota import Quota
from liveplex.gateway.relay import UpstreamLeg
from liveplex.gateway.settings import GatewaySettings
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.view import PoolView
from liveplex.gateway.watchdog import Watchdog
from liveplex.gptlive import connection, errors
from liveplex.gptlive.server import auth, backend, hop, replies
from liveplex.gptlive.settings import Settings
from liveplex.placement import Busy, Placed, PlacementClient, PlacementError, choose

logger = logging.getLogger(__name__)


STALL_MS = 100
"""A watchdog round this late means the loop was blocked (every relayed frame waited as long)."""


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _collections() -> list[int]:
    """The collector's run counts per generation (to tell a GC pause from other stalls)."""
    return [g["collections"] for g in gc.get_stats()]


class GatewayBackend:
    """See the module docstring."""

    def __init__(self, settings: GatewaySettings, protocol: Settings, api_keys: tuple[str, ...],
                 client: PlacementClient, view: PoolView, stats: GatewayStats) -> None:
        self.settings = settings
        self.protocol = protocol
        self.stats = stats
        self._api_keys = api_keys
        self._client = client
        self._view = view
        self._breaker = Breaker(settings.breaker_ms)
        self._watchdog = Watchdog(settings.upstream_silence_ms * 1_000_000)
        self.upstream_headers: Mapping[str, str] = (
            {} if settings.pod_key is None else {"Authorization": f"Bearer {settings.pod_key}"})
        """What every upstream upgrade carries besides the session's own headers: the pod token."""
        self.upstream_tls = (None if settings.upstream_ca is None
                             else upstream.Tls.trusting(settings.upstream_ca, settings.upstream_server_name))
        """Pods are dialed over TLS (`--upstream-ca`); None: plain."""
        self._quota = Quota(settings.max_sessions_per_key, settings.starts_per_key_per_s)
        """Per-key limits, for keyed gateways only (`quota`)."""
        self._leg_keys: dict[UpstreamLeg, str] = {}
        self._conn_keys: weakref.WeakKeyDictionary[connection.Connection, str] = weakref.WeakKeyDictionary()
        """The API key each socket authenticated with (for the per-key limit)."""
        self.draining = False
        """Set by the gateway's drain: new starts are refused, relayed sessions go on."""
        self._giving_back: set[asyncio.Task[None]] = set()
        self.move_turns = asyncio.Semaphore(settings.moves_at_once)
        """A turn per session moving off a draining pod (`GatewaySettings.moves_at_once`)."""
        tls = self.upstream_tls
        self._pods_http = httpx.AsyncClient(headers=self.upstream_headers, timeout=self.start_timeout_s,
                                            verify=False if tls is None else tls.context)
        """The pods' handover routes (moves), over the live socket's TLS. Made here, not on the
        first move: a client with httpx's default verification loads the CA bundle (about 50 ms on
        the loop, a gap in every relayed call's audio)."""
        self._pods_scheme = "http" if tls is None else "https"
        self._pods_tls_name = {} if tls is None or tls.server_name is None else {"sni_hostname": tls.server_name}
        """The name pod certificates carry (`--upstream-server-name`), checked instead of the address."""

    # --- backend.Backend ---------------------------------------------------------------------------

    def refusal(self) -> replies.Reply | None:
        return None

    def connection(self, headers: Headers, now_ns: int) -> connection.Connection:
        conn = connection.Connection(self._view.catalog, self.protocol, now_ns)
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
            self.stats.rejected[(pool, "key_limit")] += 1
            peer.refuse(refusal)
            return None
        leg = UpstreamLeg(self, start, peer, pool)
        self._leg_keys[leg] = key
        return leg

    # --- backend.Observer: nothing to tell, the pod settles its own reservation -----------------------

    def session_accepted(self, conn: connection.Connection, outcome: connection.Accepted) -> None:
        pass

    def session_refused(self, conn: connection.Connection, outcome: connection.Refused) -> None:
        pass

    def session_ended(self, conn: connection.Connection, outcome: connection.Ended) -> None:
        pass

    async def watch(self) -> None:
        """Run the `Watchdog` over every relayed session until cancelled; a round that ran over
        `STALL_MS` late is this loop's own stall, logged with what the collector did meanwhile."""
        period_ns = self._watchdog.period_ns
        due = time.monotonic_ns() + period_ns
        collections = _collections()
        while True:
            await asyncio.sleep(max(0, due - time.monotonic_ns()) / 1e9)
            now = time.monotonic_ns()
            late_ns = now - due
            if late_ns > STALL_MS * 1_000_000:
                self.stats.loop_stalls += 1
                logger.warning("event loop stalled", extra={
                    "stalled_ms": round(late_ns / 1e6), "sessions": len(self._leg_keys),
                    "gc_collections": [a - b for a, b in zip(_collections(), collections)]})
            collections = _collections()
            for leg in self._watchdog.check(list(self._leg_keys), now, late_ns):
                leg.silenced()
            due = now + period_ns

    # --- what the legs share (`relay.Placer`) -------------------------------------------------------

    @property
    def connect_timeout_s(self) -> float:
        return self.settings.connect_timeout_ms / 1000

    @property
    def start_timeout_s(self) -> float:
        return self.protocol.start_timeout_ms / 1000

    def tripped(self) -> frozenset[str]:
        return self._breaker.tripped(_now_ms())

    async def place(self, pool: str, session_id: str, exclude: set[str]) -> Placed | Busy | errors.ProtocolError:
        """place.lua (in the better of two sub-pools when the route splits the pool); with Redis down,
        the last fresh snapshot (fail-open), else the refusal saying placement is unavailable
        (fail-closed, or no recent snapshot)."""
        try:
            return await self._client.place_among(pool, self._view.subpools(pool), session_id, exclude)
        except PlacementError as exc:
            self.stats.redis_errors += 1
            logger.warning("placement failed", extra={"pool": pool, "error": str(exc)})
        snapshot = self._view.snapshot(pool, self.settings.snapshot_max_age_ms) if self.settings.fail_open else None
        if snapshot is None:
            self.stats.fallbacks["closed"] += 1
            return errors.placement_unavailable()
        self.stats.fallbacks["open"] += 1
        return choose(snapshot, exclude, tiebreak=random.getrandbits(31))

    async def unreachable(self, placed: Placed, session_id: str) -> None:
        """A failed connect: give the reservation back and stop dialling the pod for a while."""
        self.stats.connect_failures[placed.pod] += 1
        self._breaker.trip(placed.pod, _now_ms())
        await self.unreserve(placed, session_id)

    def give_back(self, placed: Placed, session_id: str) -> None:
        """`unreserve` in a task of the gateway's own, which outlives the leg that asked (a move
        that is lost right after it abandoned a target ends its leg, and cancels the leg's I/O)."""
        task = asyncio.get_running_loop().create_task(self.unreserve(placed, session_id))
        self._giving_back.add(task)
        task.add_done_callback(self._giving_back.discard)

    async def unreserve(self, placed: Placed, session_id: str) -> None:
        """Give back a slot placement reserved and no session will use, in the (sub-)pool holding it."""
        if placed.pool is None:  # a fail-open choice reserved nothing
            return
        try:
            await self._client.unreserve(placed.pool, placed.pod, session_id)
        except PlacementError:
            self.stats.redis_errors += 1  # the lease expires by itself

    async def _post_to_pod(self, placed: Placed, path: str, **request: Any) -> httpx.Response:
        """POST to one of a pod's handover routes, on the port and with the TLS of its live socket."""
        return await self._pods_http.post(f"{self._pods_scheme}://{placed.addr}{path}",
                                          extensions=self._pods_tls_name, **request)

    async def export(self, placed: Placed, session_id: str, after: int) -> tuple[bytes, int] | None:
        """The session's blob from its pod (`hop.EXPORT_PATH`) once it read the first `after`
        messages of the session's socket, and how many it read (`hop.READ_HEADER`); or None: the
        pod refused or failed, and the session stays there."""
        try:
            answer = await self._post_to_pod(placed, hop.EXPORT_PATH.format(session_id=session_id),
                                             params={hop.EXPORT_AFTER: after})
        except httpx.HTTPError as exc:
            logger.warning("export failed", extra={"pod": placed.pod, "error": str(exc)})
            return None
        if answer.status_code != 200:
            logger.warning("export refused", extra={"pod": placed.pod, "status": answer.status_code,
                                                    "body": answer.text[:200]})
            return None
        read = answer.headers.get(hop.READ_HEADER, "")
        return answer.content, int(read) if read.isdigit() else after

    async def import_blob(self, placed: Placed, blob: bytes, path: str) -> str | None:
        """Offer a blob (`hop.IMPORT_PATH`) or a resume record (`hop.RESUME_PATH`) to a pod: the id
        it holds it under, or None."""
        try:
            answer = await self._post_to_pod(placed, path, content=blob,
                                             headers={"content-type": "application/octet-stream"})
            import_id = answer.json().get("import_id") if answer.status_code == 201 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            logger.warning("import failed", extra={"pod": placed.pod, "error": str(exc)})
            return None
        if not isinstance(import_id, str):
            logger.warning("import refused", extra={"pod": placed.pod, "status": answer.status_code,
                                                    "body": answer.text[:200]})
            return None
        return import_id

    def moved(self, result: str) -> None:
        self.stats.moves[result] += 1

    async def close(self) -> None:
        await self._pods_http.aclose()

    def lost(self, pod: str) -> None:
        self._breaker.trip(pod, _now_ms())

    def placed(self, pool: str, started_ns: int, retried: bool) -> None:
        self.stats.placements[(pool, "retry" if retried else "placed")] += 1
        self.stats.placement_seconds.observe((time.monotonic_ns() - started_ns) / 1e9)

    def refused(self, pool: str, busy: Busy) -> None:
        self.stats.placements[(pool, "busy")] += 1
        self.stats.rejected[(pool, "no_engines" if busy.no_engines else "server_busy")] += 1

    def relaying(self, pool: str, delta: int) -> None:
        self.stats.sessions_active[pool] += delta

    def leg_done(self, leg: UpstreamLeg) -> None:
        key = self._leg_keys.pop(leg, None)
        if key is not None and self._api_keys:
            self._quota.release(key)

    @property
    def sessions(self) -> int:
        """Sessions placed or being placed by this process."""
        return len(self._leg_keys)
