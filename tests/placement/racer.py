"""One process of the placement race (test_race): a gateway placing on the whole pool, and the engine of its own pods.

Pod `i` (in sorted order) belongs to process `i % procs`. A placed session goes to its pod's owner
through that process's inbox, as a gateway's upstream connect would; the owner accepts it (unless
its own hard cap or a seeded refusal says no) with its own count, exactly as an engine does, and
ends sessions at random. After every placement the process reads the pool atomically and records
whether the pod it placed on now holds more sessions (active + reserved, read atomically) than its
capacity; an engine that receives a session above its own cap counts it as overbooked.
"""

from __future__ import annotations

import asyncio
import queue
import random
import time
from dataclasses import dataclass, field
from multiprocessing.queues import Queue

import redis.asyncio

from liveplex.placement import Placed, PlacementClient, PodRecord, pool_keys

HEARTBEAT_S = 0.1
SERVE_DEADLINE_S = 60.0


@dataclass(frozen=True)
class Plan:
    index: int
    procs: int
    url: str
    pool: str
    capacities: dict[str, int]
    placements: int
    seed: int
    end_probability: float = 0.5
    """Per placement: an engine of this process ends one of its sessions."""
    heartbeat_s: float = HEARTBEAT_S

    def owner(self, pod: str) -> int:
        return sorted(self.capacities).index(pod) % self.procs


@dataclass
class Report:
    index: int
    placed: int = 0
    busy: int = 0
    accepted: int = 0
    refused: int = 0
    unreserved: int = 0
    ended: int = 0
    overbooked: int = 0
    """Sessions that reached an engine already at its hard cap: place.lua over-committed."""
    lost_leases: int = 0
    """Accepts that found no reservation to settle (the lease is 10 s: none may expire here)."""
    violations: list[str] = field(default_factory=list)
    running: dict[str, int] = field(default_factory=dict)


def run(plan: Plan, inboxes: list[Queue], results: Queue) -> None:
    results.put(asyncio.run(_Racer(plan, inboxes).race()))


class _Racer:
    def __init__(self, plan: Plan, inboxes: list[Queue]) -> None:
        self.plan = plan
        self.inboxes = inboxes
        self.inbox = inboxes[plan.index]
        self.rng = random.Random(plan.seed)
        self.report = Report(plan.index)
        self.running = {pod: set[str]() for pod in plan.capacities if plan.owner(pod) == plan.index}
        self.finished = 0
        """Sentinels received: processes that will place no more."""

    async def race(self) -> Report:
        plan = self.plan
        async with PlacementClient(plan.url, timeout_ms=5000) as self.client, \
                redis.asyncio.Redis.from_url(plan.url, decode_responses=True, socket_timeout=5) as self.raw:
            await self.heartbeat()
            beat = time.monotonic()
            for i in range(plan.placements):
                while (message := self._next(block_s=None)) is not None:
                    await self.serve(message)
                if self.running and self.rng.random() < plan.end_probability:
                    await self.end_one()
                if time.monotonic() - beat > plan.heartbeat_s:
                    await self.heartbeat()
                    beat = time.monotonic()
                placed = await self.place(f"s{plan.index}-{i}")
                if placed is not None:
                    await self.audit(placed)
            for inbox in self.inboxes:
                inbox.put(None)
            while self.finished < plan.procs:
                message = await asyncio.to_thread(self._next, SERVE_DEADLINE_S)
                if message is not None:
                    await self.serve(message)
        self.report.running = {pod: len(sessions) for pod, sessions in self.running.items()}
        return self.report

    def _next(self, block_s: float | None) -> tuple[str, str] | None:
        """The next session for this engine; None when there is none (or a sentinel was counted)."""
        try:
            message = self.inbox.get(timeout=block_s) if block_s else self.inbox.get_nowait()
        except queue.Empty:
            if block_s:
                raise AssertionError(f"racer {self.plan.index}: no message in {block_s} s") from None
            return None
        if message is None:
            self.finished += 1
        return message

    async def place(self, session: str) -> str | None:
        """The pod the session was placed on, or None."""
        result = await self.client.place(self.plan.pool, session)
        if not isinstance(result, Placed):
            self.report.busy += 1
            return None
        self.report.placed += 1
        if self.rng.random() < 0.1:  # the gateway's upstream connect failed
            await self.client.unreserve(self.plan.pool, result.pod, session)
            self.report.unreserved += 1
        else:
            self.inboxes[self.plan.owner(result.pod)].put((session, result.pod))
        return result.pod

    async def serve(self, message: tuple[str, str]) -> None:
        session, pod = message
        sessions = self.running[pod]
        if len(sessions) >= self.plan.capacities[pod]:
            self.report.overbooked += 1
            await self.client.release(self.plan.pool, pod, session, len(sessions))
        elif self.rng.random() < 0.15:
            self.report.refused += 1
            await self.client.release(self.plan.pool, pod, session, len(sessions))
        else:
            sessions.add(session)
            if not await self.client.accept(self.plan.pool, pod, session, len(sessions)):
                self.report.lost_leases += 1
            self.report.accepted += 1

    async def end_one(self) -> None:
        pods = sorted(pod for pod, sessions in self.running.items() if sessions)
        if pods:
            pod = self.rng.choice(pods)
            self.running[pod].remove(min(self.running[pod]))
            await self.client.set_active(self.plan.pool, pod, len(self.running[pod]))
            self.report.ended += 1

    async def heartbeat(self) -> None:
        batch = self.client.batch()
        for pod, sessions in self.running.items():
            record = PodRecord(f"{pod}:8000", self.plan.capacities[pod], len(sessions))
            batch.heartbeat(self.plan.pool, pod, record, ttl_ms=60_000)
        await batch.send()

    async def audit(self, pod: str) -> None:
        """The pod just placed on: its count and leases (none expire here: 10 s), in one MULTI."""
        k = pool_keys(self.plan.pool)
        pipe = self.raw.pipeline(transaction=True)
        pipe.hget(k.pod(pod), "active").zcard(k.resv(pod))
        active, reserved = await pipe.execute()
        held = int(active) + reserved
        if held > self.plan.capacities[pod] and len(self.report.violations) < 10:
            self.report.violations.append(f"{pod}: {held} > {self.plan.capacities[pod]}")
