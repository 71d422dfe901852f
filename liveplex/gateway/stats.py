"""`GatewayStats`: what one gateway process did, as plain counters (read by `/metrics`).

One writer, the event loop. Per-frame counts are two ints; everything else is per session.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from liveplex.live.buckets import Buckets
from liveplex.placement import Busy

PLACEMENT_BUCKETS_S: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
"""Time to place and connect a session, Redis and the upstream handshake included."""


PLACEMENT_RESULTS = ("placed", "retry", "busy")
"""`placements`' results, exported from 0 for every pool the gateway routes to."""
REATTACH_RESULTS = ("reattached", "refused")
"""`reattaches`' results, exported from 0."""
STORED_RESULTS = ("complete", "failed")
"""`stored`'s results, exported from 0."""
HANGUP_RESULTS = ("hung_up", "relayed", "not_found")
"""`hangups`' results, exported from 0."""
FORK_RESULTS = ("started", "refused", "failed")
"""`forks`' results, exported from 0."""
ROOM_REFUSALS = ("server_busy", "no_engines")
"""`rejected`'s reasons for want of room, exported from 0 likewise: a counter whose first scrape
already holds its first events loses them from every `rate()`."""


@dataclass(slots=True)
class GatewayStats:
    """platform §9's gateway metrics, by label values."""

    sessions_active: Counter[str] = field(default_factory=Counter)
    """Pool -> sessions being relayed now (a gauge)."""
    placements: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(pool, result): `placed`, `busy`, `retry`, `error`."""
    rejected: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(pool, reason): `server_busy`, `no_engines`, `model_not_found`, `key_limit`, ..."""
    connect_failures: Counter[str] = field(default_factory=Counter)
    """Pod -> failed upstream connects."""
    frames_down: int = 0
    """Audio deltas relayed to clients."""
    frames_up: int = 0
    """Client frames relayed to pods."""
    redis_errors: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)
    """Mode -> placements decided without Redis: `open` (from the snapshot), `closed` (refused)."""
    placement_seconds: Buckets = field(default_factory=lambda: Buckets(PLACEMENT_BUCKETS_S))
    sessions_lost: Counter[str] = field(default_factory=Counter)
    """How relayed sessions were lost (`upstream.Ending`): `lost`, `silent`, `violation`, `too_large`."""
    moves: Counter[str] = field(default_factory=Counter)
    """Result -> sessions a draining pod asked to move: `moved`, `stayed` (no room: it drains where
    it is), `lost` (it died with its pod first, or no pod took its blob); and `resumed`: sessions
    whose pod was lost, continued on another from their checkpoints."""
    reattaches: Counter[str] = field(default_factory=Counter)
    """Result -> callers re-attaching (`?session_id=`) whose look-up began: `reattached` (continued
    on its pod), `refused` (`session_not_found`: unknown, another key, its pod no longer runs it)."""
    handed_back: int = 0
    """Relayed sessions this gateway let go of at its drain, left running on their pods for their
    callers to re-attach through another replica."""
    loop_stalls: int = 0
    """Watchdog rounds that ran over `STALL_MS` late: this process's loop was blocked."""
    stored: Counter[str] = field(default_factory=Counter)
    """Result -> stored calls (`store: true`, docs/storage.md) whose storing ended: `complete`
    (stored to the call's end, or to its hand-back), `failed` (the store failed or fell behind: the
    call went on unstored from there, its caller told by one `info store_unavailable`)."""
    stored_bytes: int = 0
    """Bytes written to the store for stored calls (recordings, events, resume records)."""
    hangups: Counter[str] = field(default_factory=Counter)
    """Result -> `POST /v1/live/sessions/{id}/hangup` answers: `hung_up` (here), `relayed` (to the
    replica holding the call), `not_found`."""
    forks: Counter[str] = field(default_factory=Counter)
    """Result -> forks of stored sessions (docs/storage.md "Forks"): `started`, `refused` (the
    stored session unknown to the key, still starting, or the store unreadable), `failed` (read,
    and no pod rebuilt it)."""

    def placed(self, pool: str, seconds: float, retried: bool) -> None:
        """A session started on a pod, `seconds` after its start was valid (retried: not on the
        first pod placed)."""
        self.placements[(pool, "retry" if retried else "placed")] += 1
        self.placement_seconds.observe(seconds)

    def refused(self, pool: str, busy: Busy) -> None:
        """A start refused for want of room."""
        self.placements[(pool, "busy")] += 1
        self.rejected[(pool, "no_engines" if busy.no_engines else "server_busy")] += 1
