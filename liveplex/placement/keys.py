"""The Redis key schema of placement (platform §6.1), written once.

A pool is one LiveEngine, named `<namespace>/<name>`. Every key of a pool carries the hash tag
`{<namespace>/<name>}`, so a pool lives in one Redis Cluster slot and its scripts stay single-slot;
the scripts build per-pod keys from the `pod_prefix` and `resv_prefix` given here, never by
formatting names themselves. `le:routes` is the one global key. A pool split over Redis Cluster
shards (`subpools`) has sub-pools `<namespace>/<name>:<k>`, each a pool of its own to every script
(its own tag `{<namespace>/<name>:<k>}`; a colon is in no Kubernetes name, so no pool is mistaken for one).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from liveplex.placement import errors

SESSION_PREFIX = "le:session:"
"""STRING per relayed session: `SESSION_PREFIX + session_id` -> JSON of where it runs and who may
re-attach to it (`gateway.sessions`): a caller back through any gateway finds its pod there."""
CALL_PREFIX = "le:call:"
"""STRING per WebRTC call: `CALL_PREFIX + session_id` -> the URL of the gateway holding its media,
where a sideband attach arriving at another replica is relayed (`gateway.calls`)."""
ROUTES = "le:routes"
"""HASH: model name -> pool name (`ns/name`), `ns/name*<count>` for a pool split into sub-pools
(`subpools.route`); written by the operator, read by gateways."""

# Kubernetes names: a namespace is a DNS-1123 label, a LiveEngine or pod name a DNS-1123 subdomain.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_SUBPOOL = re.compile(r"0|[1-9][0-9]{0,3}")


@dataclass(frozen=True, slots=True)
class PoolKeys:
    """The keys of one pool; build it with `pool_keys`, which checks the name."""

    name: str
    """`<namespace>/<name>`, as in `le:routes`."""

    @property
    def tag(self) -> str:
        return "le:{" + self.name + "}:"

    @property
    def members(self) -> str:
        """ZSET: pod name -> last heartbeat (ms, Redis TIME)."""
        return self.tag + "members"

    @property
    def config(self) -> str:
        """STRING: the pool's served description (`/live/config` JSON)."""
        return self.tag + "config"

    @property
    def events(self) -> str:
        """PUB/SUB channel: drain notices (a hint only; messages can be lost)."""
        return self.tag + "events"

    @property
    def room(self) -> str:
        """ZSET: pod -> rank (free slots, + 2^32 when degraded) for the members with room (the index)."""
        return self.tag + "room"

    @property
    def expiry(self) -> str:
        """ZSET: pod -> its earliest lease expiry (ms): when its room next grows by itself (the index)."""
        return self.tag + "expiry"

    @property
    def counted(self) -> str:
        """HASH: pod -> `capacity active`, what it adds to the busy totals (the index)."""
        return self.tag + "counted"

    @property
    def totals(self) -> str:
        """HASH: `capacity`, `active`, `engines` summed over `counted` (the index)."""
        return self.tag + "totals"

    @property
    def index(self) -> list[str]:
        """The KEYS of every script that changes a pod, in `index.lua`'s order."""
        return [self.members, self.room, self.expiry, self.counted, self.totals]

    @property
    def pod_prefix(self) -> str:
        """`pod_prefix + pod` is the pod's HASH (its `PodRecord`)."""
        return self.tag + "pod:"

    @property
    def resv_prefix(self) -> str:
        """`resv_prefix + pod` is the pod's ZSET of reservations: session id -> lease expiry (ms)."""
        return self.tag + "resv:"

    def pod(self, pod: str) -> str:
        return self.pod_prefix + check_pod(pod)

    def resv(self, pod: str) -> str:
        return self.resv_prefix + check_pod(pod)


def subpool(pool: str, k: int) -> str:
    """The name of sub-pool `k` of `pool`: `<namespace>/<name>:<k>`."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise errors.InvalidName("subpool", k, "a sub-pool is numbered from 0")
    return pool_keys(f"{pool_keys(pool).name}:{k}").name


def pool_keys(pool: str) -> PoolKeys:
    """The keys of `pool` (`<namespace>/<name>`, or a sub-pool `<namespace>/<name>:<k>`); raises
    `InvalidName` (param `pool`) for any other shape."""
    if not isinstance(pool, str):
        raise errors.InvalidName("pool", pool, "a pool is named <namespace>/<name>")
    return _checked(pool)


@functools.lru_cache(maxsize=1024)
def _checked(pool: str) -> PoolKeys:
    """Checked once per name: every call of every writer and placement builds the pool's keys."""
    if pool.count("/") != 1:
        raise errors.InvalidName("pool", pool, "a pool is named <namespace>/<name>")
    namespace, name = pool.split("/")
    name, colon, k = name.partition(":")
    if colon and not _SUBPOOL.fullmatch(k):
        raise errors.InvalidName("pool", pool, "a sub-pool is <namespace>/<name>:<k>, k a number from 0")
    if not _LABEL.fullmatch(namespace):
        raise errors.InvalidName("pool", pool, "the namespace must be a DNS-1123 label (a-z, 0-9, '-', at most 63)")
    if not _SUBDOMAIN.fullmatch(name):
        raise errors.InvalidName("pool", pool, "the name must be a DNS-1123 subdomain (a-z, 0-9, '-', '.')")
    return PoolKeys(pool)


def check_pod(pod: str) -> str:
    """`pod` unchanged if it is a Kubernetes pod name; raises `InvalidName` (param `pod`) otherwise."""
    if not isinstance(pod, str) or not _SUBDOMAIN.fullmatch(pod):
        raise errors.InvalidName("pod", pod, "a pod name must be a DNS-1123 subdomain (a-z, 0-9, '-', '.')")
    return pod


def check_model(model: str) -> str:
    """`model` unchanged if it can be a `le:routes` field; raises `InvalidName` (param `model`) otherwise."""
    if not isinstance(model, str) or not model or model != model.strip():
        raise errors.InvalidName("model", model, "a model name is a non-empty string without outer spaces")
    return model
