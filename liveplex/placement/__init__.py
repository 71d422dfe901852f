"""Redis placement shared by engine pods, gateways and the operator (platform §6): keys, scripts, records.

Pure: `keys`, `timing`, `record`, `snapshot`, `choice`, `load`. I/O: `client` (asyncio Redis) and
`local_redis` (a throwaway redis-server, or a local Redis Cluster); `subpools` (pure) splits a pool
over cluster shards. See docs/placement.md.
"""

from liveplex.placement import subpools
from liveplex.placement.choice import Busy, Mode, Placed, choose
from liveplex.placement.client import PlacementClient
from liveplex.placement.errors import InvalidName, InvalidRecord, PlacementError, RedisRefused, RedisUnavailable
from liveplex.placement.keys import ROUTES, PoolKeys, check_model, check_pod, pool_keys
from liveplex.placement.load import PoolLoad, Summary
from liveplex.placement.local_redis import LocalRedis, LocalRedisError
from liveplex.placement.record import PodRecord
from liveplex.placement.snapshot import Member, Snapshot
from liveplex.placement.timing import (
    CIRCUIT_BREAKER_MS,
    HEARTBEAT_MS,
    LEASE_MS,
    POD_TTL_MS,
    SNAPSHOT_MAX_AGE_MS,
    STALE_MS,
)

__all__ = [
    "subpools",
    "Busy", "Mode", "Placed", "choose",
    "PlacementClient",
    "InvalidName", "InvalidRecord", "PlacementError", "RedisRefused", "RedisUnavailable",
    "ROUTES", "PoolKeys", "check_model", "check_pod", "pool_keys",
    "PoolLoad", "Summary",
    "LocalRedis", "LocalRedisError",
    "PodRecord",
    "Member", "Snapshot",
    "CIRCUIT_BREAKER_MS", "HEARTBEAT_MS", "LEASE_MS", "POD_TTL_MS", "SNAPSHOT_MAX_AGE_MS", "STALE_MS",
]
