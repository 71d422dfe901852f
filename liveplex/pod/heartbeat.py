"""`Heartbeat`: a pod's load in its pool's Redis (platform §6.3), the pod's `Publisher`.

Every 500 ms it marks the pod alive and writes what changed in its record since the last beat
that landed (capacity, active, draining and degraded always: placement ranks by them); the pool's
served description only when it changed. When Redis has lost the record (it restarted empty, or
the TTL ran out) the beat says so and the pod sends the whole record and the description at once,
so Redis is whole again within a period. A pool split into sub-pools (Redis Cluster) has the pod
in one of them, `subpools.of(pool, name, count)`: its beats, settles, drain and removal go there; the
served description, the same for every pod, to the pool's own key, where gateways read it.
Between heartbeats, each session outcome is written at once (`accepted`, `released`, `ended`:
the pod's `backend.Settles`) through the accept and release scripts: a session placed by a
gateway leaves its reservation exactly when it starts or is refused, so it is never counted twice
or zero times. The engine's hard cap stays the arbiter: Redis only steers. Redis errors are
logged and counted, never raised into serving. Every write goes through one
`writes.OrderedWrites`, so writes land in the order their facts were read.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from liveplex import __version__
from liveplex.placement import HEARTBEAT_MS, PlacementClient, PlacementError, PodRecord, check_pod, subpools
from liveplex.pod import stats, writes

if TYPE_CHECKING:
    from liveplex.pod.pod import Pod

logger = logging.getLogger(__name__)
T = TypeVar("T")


def address(advertise: str | None, bound: tuple[str, int] | None) -> str:
    """`host:port` the gateway dials: `--advertise` without its scheme, else the bound address."""
    if advertise:
        return advertise.split("://", 1)[-1].rstrip("/")
    if bound is None:
        raise RuntimeError("the pod is not bound yet")
    host, port = bound
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def default_name(addr: str) -> str:
    """A member name from an address when no `--pod-name` is given: `127.0.0.1:8001` ->
    `127.0.0.1-8001` (pod names are DNS subdomains)."""
    return check_pod(re.sub(r"[^a-z0-9.-]+", "-", addr.lower()).strip("-."))


class Heartbeat:
    """See the module docstring."""

    def __init__(self, redis_url: str, pool: str, pod_name: str | None, count: int = 1,
                 period_ms: int = HEARTBEAT_MS) -> None:
        self._client = PlacementClient(redis_url)
        self._pool = pool
        self._count = subpools.check_count(count)
        self._name = pod_name
        self._home = None if pod_name is None else subpools.of(pool, pod_name, count)
        """The (sub-)pool the pod is a member of, once its name is known."""
        self._period_s = period_ms / 1000
        self._pod: Pod | None = None
        self._task: asyncio.Task[None] | None = None
        self._writes = writes.OrderedWrites(self._call)
        self._before: stats.PodSnapshot | None = None
        self._started_ms = int(time.time() * 1000)
        self._landed: PodRecord | None = None
        """The record of the last beat Redis took: the next one sends what changed since."""
        self._config: dict[str, object] | None = None
        """The served description as last written; None: write it with the next beat."""
        self.errors = 0
        """Redis calls that failed (each logged)."""
        self.reserved = 0
        """The pod's unexpired reservations at the last heartbeat (kept when a beat fails)."""

    @property
    def name(self) -> str:
        assert self._name is not None
        return self._name

    @property
    def home(self) -> str:
        assert self._home is not None
        return self._home

    async def start(self, pod: Pod) -> None:
        self._pod = pod
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        pod = self._pod
        assert pod is not None
        if pod.settings.advertise is None:
            await pod.listening.wait()  # the bound address is the default member name
        self._name = self._name or default_name(address(pod.settings.advertise, pod.bound))
        self._home = subpools.of(self._pool, self._name, self._count)
        while True:
            await self.beat()
            await asyncio.sleep(self._period_s)

    def record(self) -> PodRecord:
        """The pod as it is now, with tick health over the last period."""
        pod = self._pod
        assert pod is not None
        now = pod.snapshot()
        health = stats.window(now, self._before)
        self._before = now
        capacity, active, paused = pod.backend.occupancy()
        return PodRecord(
            addr=address(pod.settings.advertise, pod.bound), capacity=capacity,
            active=active, paused=paused, draining=now.draining,
            degraded=health.degraded(pod.settings.lateness_budget_ms, active), tick_p99_us=health.tick_p99_us,
            late_permille=health.late_permille, late_p99_us=round(health.late_p99_ms * 1000),
            engine_version=__version__, started_ms=self._started_ms)

    def _active(self) -> int:
        """Sessions started and not ended in the engine's batch (paused ones are not), counted on
        the loop as they happen. Not `Pulse.sessions`: that lags a tick behind an end, and would
        hold a freed slot for a heartbeat. Sessions still starting are covered by their
        reservation until `accept`."""
        pod = self._pod
        assert pod is not None
        return pod.backend.occupancy().active

    async def beat(self) -> None:
        pod = self._pod
        assert pod is not None
        record = self.record()
        reserved = await self._writes.send(self._client.heartbeat(self.home, self.name, record, since=self._landed))
        if reserved is None and self._landed is not None:  # the record is gone (or the call failed): all of it
            self._landed = self._config = None
            reserved = await self._writes.send(self._client.heartbeat(self.home, self.name, record))
        if reserved is None:
            self._landed = None
            return
        self._landed, self.reserved = record, reserved
        config = pod.served.config()
        if config != self._config and await self._writes.send(self._write_config(config)):
            self._config = config

    async def _write_config(self, config: dict[str, object]) -> bool:
        await self._client.write_config(self._pool, config)
        return True

    # --- backend.Settles: each outcome at once -------------------------------------------------------

    def accepted(self, session_id: str) -> None:
        if self._name is not None:
            self._writes.send(self._client.accept(self.home, self.name, session_id, self._active()))

    def released(self, session_id: str) -> None:
        if self._name is not None:
            self._writes.send(self._client.release(self.home, self.name, session_id, self._active()))

    def ended(self) -> None:
        if self._name is not None:
            self._writes.send(self._client.set_active(self.home, self.name, self._active()))

    async def drain(self) -> None:
        if self._name is not None:
            await self._writes.send(self._client.drain(self.home, self.name))
            await self.beat()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._writes.close()  # what was queued lands first, in order
        if self._name is not None:
            await self._call(self._client.remove_pod(self.home, self.name))
        await self._client.close()

    async def _call(self, call: Coroutine[Any, Any, T]) -> T | None:
        """The call's answer, or None when Redis failed (logged and counted)."""
        try:
            return await call
        except PlacementError as exc:
            self.errors += 1
            logger.warning("redis call failed", extra={"pool": self._pool, "error": str(exc)})
            return None
