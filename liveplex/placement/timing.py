"""The placement timing constants (platform §6.2), written once; every writer and reader uses these.

The pod hash outlives 4 heartbeats and a pod is stale after 3, so a pod that misses one or two beats
(a GC pause, a slow Redis) keeps its place, and a dead one is skipped within 1.5 s even before its
hash expires.
"""

from __future__ import annotations

HEARTBEAT_MS = 500
"""How often an engine pod writes its hash and its `members` score."""

POD_TTL_MS = 4 * HEARTBEAT_MS
"""`PEXPIRE` of a pod hash: a pod that stops heartbeating disappears by itself."""

STALE_MS = 3 * HEARTBEAT_MS
"""A member whose last heartbeat is older than this is pruned and never placed on."""

LEASE_MS = 10_000
"""How long a reservation holds a slot while the gateway connects and the engine starts the session."""

CIRCUIT_BREAKER_MS = 10_000
"""How long a gateway excludes a pod after a connect failure to it (platform §7.5)."""

SNAPSHOT_MAX_AGE_MS = 5_000
"""Fail-open (platform §7.12): the oldest snapshot a gateway may still place from while Redis is down."""

SHARD_BREAKER_MS = 2_000
"""How long a gateway leaves a sub-pool out of its choices after its shard did not answer (`subpools`):
a dead shard costs one failed call per sub-pool per window, not one per placement."""
