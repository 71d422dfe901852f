"""`PoolLoad`: one pool's load, for the operator's status roll-up and autoscaling; `Summary`: a pool's
load with its best candidates, what gateways and the operator read every second."""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.placement import snapshot, timing


@dataclass(frozen=True, slots=True)
class PoolLoad:
    """Totals over a pool's pods; sessions count on every fresh pod, capacity only where placement may go."""

    pods: int
    """Members whose hash has not expired, fresh or not."""
    fresh: int
    """Pods that heartbeated within the stale window."""
    draining: int
    """Fresh pods that take no new sessions."""
    degraded: int
    """Fresh pods that run late."""
    active: int
    """Sessions running or starting on fresh pods, draining ones included."""
    reserved: int
    """Unexpired reservations on fresh pods: sessions placed but not yet started."""
    capacity: int
    """Slots on fresh pods that are not draining."""
    worst_tick_p99_us: int
    """The highest p99 tick duration among fresh pods; 0 with none."""

    @property
    def occupied(self) -> int:
        """Sessions holding a slot: the numerator of the occupancy signal (platform §8)."""
        return self.active + self.reserved

    @classmethod
    def of(cls, pool: snapshot.Snapshot, stale_ms: int = timing.STALE_MS) -> PoolLoad:
        """The totals of a whole pool, summed over its fresh members."""
        fresh = pool.fresh(stale_ms)
        return cls(
            pods=len(pool.members),
            fresh=len(fresh),
            draining=sum(m.record.draining for m in fresh),
            degraded=sum(m.record.degraded for m in fresh),
            active=sum(m.record.active for m in fresh),
            reserved=sum(m.reserved for m in fresh),
            capacity=sum(m.record.capacity for m in fresh if not m.record.draining),
            worst_tick_p99_us=max((m.record.tick_p99_us for m in fresh), default=0),
        )


@dataclass(frozen=True, slots=True)
class Summary:
    """A pool's totals and its best candidates (`PlacementClient.summary`, O(candidates · log N)):
    enough for fail-open placement (platform §7.12) and the operator's roll-up without reading
    every pod."""

    candidates: snapshot.Snapshot
    """The best pods only (spread order), at Redis time `candidates.now_ms`."""
    load: PoolLoad
    """The whole pool's totals, from its index."""
