"""`liveplex bench place --quality`: what splitting a pool into sub-pools costs placement quality.

One pool of `--pods` pods (`--capacity` slots each) is filled to `--occupancy`, then held there: each
step ends a random running session (`unreserve`: its slot is free again) and places one more with
`PlacementClient.place_among` over `count` sub-pools (1: the whole pool, the single-shard choice).
The bench knows every pod's count, so each decision is graded against the pool's global best (spread:
the most free slots anywhere): how often the pick was worse, by how many slots, and at the end how
far apart the fullest and emptiest pods and sub-pools are. Every count in `--subpools` runs on the
same pods, the same seed and the same Redis (or local cluster, `--shards`), one after the other.
Redis main-thread CPU per step (summed over the shards) and the step's round trips come with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import Any

import redis.asyncio

from liveplex import percentiles
from liveplex.bench import loop
from liveplex.bench.place_sim import FAR_MS  # TTL, stale window and lease: no beats here, sessions end by unreserve
from liveplex.placement import Placed, PlacementClient, PodRecord, subpools


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    url: str
    cluster: bool
    pods: int
    capacity: int
    counts: tuple[int, ...]
    steps: int
    occupancy: float
    seed: int = 25

    def __post_init__(self) -> None:
        for name in ("pods", "capacity", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be >= 1")
        if not 0 < self.occupancy < 1:
            raise ValueError("--occupancy must be between 0 and 1")
        for count in self.counts:
            subpools.check_count(count)
            if count > self.pods:
                raise ValueError("--subpools must not exceed --pods")


class _Pool:
    """The bench's own count of every pod: the truth each decision is graded against."""

    def __init__(self, pods: list[str], capacity: int) -> None:
        self.free = dict.fromkeys(pods, capacity)
        self.by_free = [0] * capacity + [len(pods)]
        """How many pods have each number of free slots: the best is the highest non-zero entry."""
        self.running: list[tuple[str, str, str]] = []
        """(sub-pool, pod, session) of every placed session."""

    def best(self) -> int:
        return max(n for n, pods in enumerate(self.by_free) if pods)

    def take(self, sub: str, pod: str, session: str) -> None:
        self._move(pod, -1)
        self.running.append((sub, pod, session))

    def end(self, rng: random.Random) -> tuple[str, str, str]:
        i = rng.randrange(len(self.running))
        self.running[i], self.running[-1] = self.running[-1], self.running[i]
        sub, pod, session = self.running.pop()
        self._move(pod, +1)
        return sub, pod, session

    def _move(self, pod: str, by: int) -> None:
        self.by_free[self.free[pod]] -= 1
        self.free[pod] += by
        self.by_free[self.free[pod]] += 1


async def _redis_cpu_s(nodes: list[redis.asyncio.Redis]) -> float:
    infos = await asyncio.gather(*(n.info("cpu") for n in nodes))
    return sum(float(i["used_cpu_user_main_thread"]) + float(i["used_cpu_sys_main_thread"]) for i in infos)


async def _nodes(plan: Plan) -> list[redis.asyncio.Redis]:
    if not plan.cluster:
        return [redis.asyncio.Redis.from_url(plan.url)]
    async with redis.asyncio.RedisCluster.from_url(plan.url) as cluster:
        # redis types a node's port str | int; the cluster's nodes have ints
        return [redis.asyncio.Redis(host=n.host, port=int(n.port)) for n in cluster.get_primaries()]


async def _one(plan: Plan, count: int, client: PlacementClient, nodes: list[redis.asyncio.Redis]) -> dict[str, Any]:
    rng = random.Random(plan.seed)
    pool = f"bench/quality-{count}"
    pods = [f"pod-{i:05d}" for i in range(plan.pods)]
    home = {pod: subpools.of(pool, pod, count) for pod in pods}
    batch = client.batch()
    for i, pod in enumerate(pods):
        batch.heartbeat(home[pod], pod, PodRecord(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:8000",
                                                  plan.capacity, 0), ttl_ms=FAR_MS)
    await batch.send()
    truth = _Pool(pods, plan.capacity)
    serial = 0

    async def place() -> tuple[int, int, int]:
        """One placement: (the pool's best free before it, the pick's free before it, µs)."""
        nonlocal serial
        serial += 1
        best = truth.best()
        t0 = time.perf_counter_ns()
        placed = await client.place_among(pool, count, f"q{serial}", lease_ms=FAR_MS, stale_ms=FAR_MS)
        took = (time.perf_counter_ns() - t0) // 1000
        if not isinstance(placed, Placed):
            raise RuntimeError(f"the quality pool was full at occupancy {plan.occupancy}: {placed}")
        picked = truth.free[placed.pod]
        assert placed.pool is not None  # place_among reserved there
        truth.take(placed.pool, placed.pod, f"q{serial}")
        return best, picked, took

    for _ in range(round(plan.occupancy * plan.pods * plan.capacity)):
        await place()
    worse = short = 0
    place_us: list[int] = []
    end_us: list[int] = []
    cpu0, t0 = await _redis_cpu_s(nodes), time.perf_counter()
    for _ in range(plan.steps):
        sub, pod, session = truth.end(rng)
        t1 = time.perf_counter_ns()
        await client.unreserve(sub, pod, session)
        end_us.append((time.perf_counter_ns() - t1) // 1000)
        best, picked, took = await place()
        place_us.append(took)
        worse += picked < best
        short += best - picked
    cpu1, seconds = await _redis_cpu_s(nodes), time.perf_counter() - t0
    held = [plan.capacity - f for f in truth.free.values()]
    by_sub: dict[str, list[int]] = {}
    for pod, f in truth.free.items():
        by_sub.setdefault(home[pod], []).append(plan.capacity - f)
    occupancy = [sum(h) / (len(h) * plan.capacity) for h in by_sub.values()]
    for start in range(0, len(pods), 50):  # the pool leaves nothing behind
        await asyncio.gather(*(client.remove_pod(home[pod], pod) for pod in pods[start:start + 50]))
    return {
        "subpools": count,
        "worse_than_best": round(worse / plan.steps, 4),
        "mean_shortfall_slots": round(short / plan.steps, 4),
        "pod_spread_slots": max(held) - min(held),
        "subpool_occupancy_spread": round(max(occupancy) - min(occupancy), 4),
        "redis_cpu_us_per_step": round((cpu1 - cpu0) * 1e6 / plan.steps, 1),
        "steps_per_s": round(plan.steps / seconds, 1),
        "place_ms": percentiles.summarize(place_us).as_dict(),
        "end_ms": percentiles.summarize(end_us).as_dict(),
    }


async def _measure(plan: Plan) -> dict[str, Any]:
    nodes = await _nodes(plan)
    try:
        async with PlacementClient(plan.url, timeout_ms=60_000, cluster=plan.cluster) as client:
            runs = [await _one(plan, count, client, nodes) for count in plan.counts]
    finally:
        for node in nodes:
            await node.aclose()
    return {"pods": plan.pods, "capacity": plan.capacity, "occupancy": plan.occupancy, "steps": plan.steps,
            "shards": len(nodes) if plan.cluster else 1, "runs": runs}


def measure(plan: Plan) -> dict[str, Any]:
    """Each sub-pool count of `plan`, graded against the global best; the pools are emptied afterwards."""
    return loop.run(_measure(plan))
