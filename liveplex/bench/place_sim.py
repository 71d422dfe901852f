"""`liveplex bench place --simulate`: one Redis under a simulated pool, no gateway, no engines.

What a pool of `--pods` engine pods costs Redis, measured the way it runs: three processes besides
Redis, so the heartbeats, the placements and the measurement do not share one event loop.

- **pods**: until the gateway's last placed session has reached it, every pod heartbeats every
  `HEARTBEAT_MS` (spread over 10 ms ticks, each tick's writes in one pipelined round trip, in order),
  its tick p99 changing every beat as a real pod's does; a beat sends what changed since the last.
  Each placed session is accepted by its pod with the pod's own count (or refused when the pod is at
  its cap: *overbooked*, which placement must never cause),
  held for `--hold` seconds, then ended (`set_active`).
- **probe**: one more pod (capacity 0, never placed on) heartbeats every 10 ms from a process of its
  own (its round trips wait on Redis only, not on the simulator's loop): the round trip a pod sees.
- **gateway**: `--concurrency` callers place at `--rate` placements/s in all (the gateway's
  `place.lua` round trip) and hand each placed session to its pod, as an upstream connect would.
- **this one**: Redis's main-thread CPU (`INFO cpu`) over a heartbeats-only phase and over the
  placement phase, pool membership sampled every 250 ms (live pods pruned as stale means heartbeats
  starved), the audit (no pod holds more than its capacity), then the decision alone.

Redis CPU per heartbeat comes from the heartbeats-only phase; per placement = (placing-phase CPU -
its heartbeats at that cost) / placements, so it covers the decision and its accept and end; the
ceiling one Redis sustains is the core left by every pod beating at the real rate over that. The
simulator may not reach the real heartbeat rate on a small machine (`heartbeats_per_s` says what it
reached; a pod it could not beat in time goes stale, `fewest_members`): the costs are per call and
hold either way. The
decision alone is timed on a second pool of the same size whose pods always have room, sequential,
as Redis CPU per call next to a `PING`'s; then a gateway's refresh of that pool, the summary it
reads now and the whole snapshot it read before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import multiprocessing
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

import redis.asyncio

from liveplex import percentiles
from liveplex.bench import loop
from liveplex.placement import HEARTBEAT_MS, Placed, PlacementClient, PodRecord, pool_keys, subpools

POOL = "bench/sim"
DECISION_POOL = "bench/decision"
TICK_S = 0.01
"""The pods' and the probe's clock: heartbeats of one tick go out in one round trip."""
WARM_S = 2.0
"""The heartbeats-only phase: pods settle in and Redis's heartbeat CPU is measured."""
DECISION_BUDGET_S = 3.0
"""The decision-alone phase stops after this long, or after `decision_rounds` calls."""
PINGS = 2000
"""PINGs timed after the decisions: the unit of a request's cost to Redis (read, parse, reply)."""
FAR_MS = 3_600_000
"""TTL and stale window of the decision pool, whose pods do not heartbeat."""


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    url: str
    pods: int
    capacity: int
    rate: float
    seconds: float
    hold_s: float
    concurrency: int
    decision_rounds: int
    warm_s: float = WARM_S
    subpools: int = 1
    """The pool split into this many sub-pools (`placement.subpools`); the gateway places among them."""
    cluster: bool = False
    """`url` is a node of a Redis Cluster: the sub-pools spread over its shards."""

    def __post_init__(self) -> None:
        subpools.check_count(self.subpools)
        for name in ("pods", "capacity", "concurrency", "decision_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
        if self.rate <= 0 or self.seconds <= 0 or self.hold_s < 0:
            raise ValueError("--rate and --seconds must be > 0 and --hold >= 0")


def pod_name(i: int) -> str:
    return f"pod-{i:05d}"


def homes(pool: str, pods: int, count: int) -> list[str]:
    """The sub-pool each pod heartbeats into (the pool itself when it is not split)."""
    return [subpools.of(pool, pod_name(i), count) for i in range(pods)]


def _record(i: int, capacity: int, active: int, tick_p99_us: int = 0) -> PodRecord:
    return PodRecord(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:8000", capacity, active, tick_p99_us=tick_p99_us,
                     engine_version="sim", started_ms=1)


# --- the pods process ----------------------------------------------------------------------------

@dataclasses.dataclass
class PodsReport:
    accepted: int = 0
    overbooked: int = 0
    ended: int = 0
    heartbeats: int = 0
    batch_us: list[int] = dataclasses.field(default_factory=list)
    late_ticks: int = 0
    """Ticks that started more than a tick late (Redis or this process could not keep up)."""


def run_pods(plan: Plan, inbox: Connection, ready: Event, stop: Event, beats: Any, results: Any) -> None:
    results.put(("pods", loop.run(_pods(plan, inbox, ready, stop, beats))))


async def _pods(plan: Plan, inbox: Connection, ready: Event, stop: Event, beats: Any) -> PodsReport:
    report = PodsReport()
    running = [0] * plan.pods
    landed: list[PodRecord | None] = [None] * plan.pods
    """Each pod's last beat that landed: the next one sends what changed since."""
    ends: list[tuple[float, int]] = []
    slots = max(1, round(HEARTBEAT_MS / 1000 / TICK_S))
    home = homes(POOL, plan.pods, plan.subpools)
    async with PlacementClient(plan.url, timeout_ms=10_000, cluster=plan.cluster) as client:
        await client.load_scripts()  # on every shard: the pods' own connections send EVALSHA
        wire = await _Wires.open(plan.url, plan.cluster, sorted(set(home)))
        ready.set()
        tick, next_tick, placing = 0, time.perf_counter(), True
        while placing:  # until the gateway's last message: every placed session reaches its pod
            batch = client.batch()
            while inbox.poll():
                sessions = inbox.recv()
                if sessions is None:
                    placing = False
                    break
                for session, i in sessions:
                    if running[i] >= plan.capacity:
                        report.overbooked += 1
                        batch.release(home[i], pod_name(i), session, running[i])
                        continue
                    running[i] += 1
                    report.accepted += 1
                    batch.accept(home[i], pod_name(i), session, running[i])
                    heapq.heappush(ends, (time.perf_counter() + plan.hold_s, i))
            while ends and ends[0][0] <= time.perf_counter():
                i = heapq.heappop(ends)[1]
                running[i] -= 1
                report.ended += 1
                batch.set_active(home[i], pod_name(i), running[i])
            beating = range(tick % slots, plan.pods, slots)
            records = [_record(i, plan.capacity, running[i], 4000 + tick % 7) for i in beating]
            for i, record in zip(beating, records):
                batch.heartbeat(home[i], pod_name(i), record, since=landed[i])
            report.heartbeats += len(records)
            beats.value += len(records)
            t0 = time.perf_counter_ns()
            replies = await wire.send(batch.commands())
            report.batch_us.append((time.perf_counter_ns() - t0) // 1000)
            for i, record, reserved in zip(beating, records, replies[len(replies) - len(records):]):
                landed[i] = record if reserved >= 0 else None  # -1: the record was lost, send it whole
            tick += 1
            next_tick += TICK_S
            delay = next_tick - time.perf_counter()
            if delay < -TICK_S:
                report.late_ticks += 1
            await asyncio.sleep(max(0.0, delay))
        await wire.close()
    return report


class _Wire:
    """One of the pods' own connections: their batches packed and their integer replies read here,
    because redis-py's packing costs ~80 µs of Python per heartbeat, more than a 2-core machine can
    give 10,000 pods beating twice a second. The scripts are loaded by `PlacementClient.load_scripts`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> _Wire:
        return cls(*await asyncio.open_connection(host, port))

    def write(self, commands: list[list[Any]]) -> None:
        out = []
        for command in commands:
            out.append(b"*%d\r\n" % len(command))
            for arg in command:
                data = arg if isinstance(arg, bytes) else str(arg).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self._writer.write(b"".join(out))

    async def read(self, n: int) -> list[int]:
        replies = []
        for _ in range(n):
            line = await self._reader.readline()
            if not line.startswith(b":"):
                raise RuntimeError(f"the pool simulator expected an integer reply, got {line!r}")
            replies.append(int(line[1:]))
        return replies

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


class _Wires:
    """A connection per shard; each command goes to the shard of its first key (its sub-pool's slot),
    in order per shard, the replies put back in the order of the commands."""

    def __init__(self, wires: list[_Wire], shard_of: dict[str, int]) -> None:
        self._wires, self._shard_of = wires, shard_of

    @classmethod
    async def open(cls, url: str, cluster: bool, pools: list[str]) -> _Wires:
        if not cluster:
            where = urllib.parse.urlsplit(url)
            wire = await _Wire.open(where.hostname or "127.0.0.1", where.port or 6379)
            return cls([wire], {pool_keys(p).members: 0 for p in pools})
        async with redis.asyncio.RedisCluster.from_url(url) as nodes:
            await nodes.initialize()
            primaries = [(n.host, int(n.port)) for n in nodes.get_primaries()]
            owner = {}
            for pool in pools:
                node = nodes.get_node_from_key(pool_keys(pool).members)
                assert node is not None, "a formed cluster serves every slot"
                owner[pool_keys(pool).members] = primaries.index((node.host, int(node.port)))
        return cls([await _Wire.open(host, port) for host, port in primaries], owner)

    async def send(self, commands: list[list[Any]]) -> list[int]:
        if not commands:
            return []
        routed: list[list[int]] = [[] for _ in self._wires]
        for i, command in enumerate(commands):
            routed[self._shard_of[command[3]]].append(i)  # EVALSHA sha numkeys KEYS[1]: the members key
        for wire, mine in zip(self._wires, routed):
            if mine:
                wire.write([commands[i] for i in mine])
        answers = await asyncio.gather(*(w.read(len(mine)) for w, mine in zip(self._wires, routed)))
        replies = [0] * len(commands)
        for mine, answer in zip(routed, answers):
            for i, reply in zip(mine, answer):
                replies[i] = reply
        return replies

    async def close(self) -> None:
        for wire in self._wires:
            await wire.close()


def run_probe(plan: Plan, ready: Event, stop: Event, beats: Any, results: Any) -> None:
    results.put(("probe", loop.run(_probe(plan, ready, stop, beats))))


async def _probe(plan: Plan, ready: Event, stop: Event, beats: Any) -> list[int]:
    """The probe pod's heartbeat round trips, µs."""
    pool = subpools.of(POOL, "probe", plan.subpools)
    samples: list[int] = []
    async with PlacementClient(plan.url, timeout_ms=10_000, cluster=plan.cluster) as client:
        await client.heartbeat(pool, "probe", PodRecord("10.255.255.255:8000", 0, 0))  # connected, loaded
        ready.set()
        while not stop.is_set():
            beats.value += 1
            t0 = time.perf_counter_ns()
            await client.heartbeat(pool, "probe", PodRecord("10.255.255.255:8000", 0, 0))
            samples.append((time.perf_counter_ns() - t0) // 1000)
            await asyncio.sleep(TICK_S)
    return samples


# --- the gateway process -------------------------------------------------------------------------

@dataclasses.dataclass
class GatewayReport:
    placed: int = 0
    busy: int = 0
    place_us: list[int] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def run_gateway(plan: Plan, outbox: Connection, ready: Event, live: Event, stop: Event, placed: Any,
                results: Any) -> None:
    results.put(("gateway", loop.run(_gateway(plan, outbox, ready, live, stop, placed))))


async def _gateway(plan: Plan, outbox: Connection, ready: Event, live: Event, stop: Event,
                   placed: Any) -> GatewayReport:
    report = GatewayReport()
    pending: list[tuple[str, int]] = []
    async with PlacementClient(plan.url, timeout_ms=10_000, cluster=plan.cluster) as client:
        await client.route("warm-up")  # connected before the clock starts
        ready.set()
        await asyncio.to_thread(live.wait)
        t0 = time.perf_counter()

        async def caller(n: int) -> None:
            period = plan.concurrency / plan.rate
            due = t0 + n / plan.rate
            calls = 0
            while not stop.is_set():
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                due = max(due + period, time.perf_counter() - period)  # behind: no burst to catch up
                calls += 1
                session = f"s{n}-{calls}"
                started = time.perf_counter_ns()
                result = await client.place_among(POOL, plan.subpools, session)
                report.place_us.append((time.perf_counter_ns() - started) // 1000)
                if isinstance(result, Placed):
                    report.placed += 1
                    placed.value += 1
                    pending.append((session, int(result.pod.removeprefix("pod-"))))
                else:
                    report.busy += 1

        async def flusher() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.005)
                if pending:
                    outbox.send(pending[:])
                    pending.clear()

        await asyncio.gather(flusher(), *(caller(n) for n in range(plan.concurrency)))
        report.seconds = time.perf_counter() - t0
    outbox.send(pending)
    outbox.send(None)
    return report


# --- this process: phases, Redis CPU, audit ------------------------------------------------------

def _cpu_s(info: dict[str, Any]) -> float:
    """Redis's main thread CPU (user + sys): where commands and scripts run."""
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


class _Nodes:
    """The Redis under measure: every primary (each shard's main thread: CPU summed) and a client for
    the pool's keys (cluster-aware when it is a cluster)."""

    def __init__(self, data: redis.asyncio.Redis | redis.asyncio.RedisCluster, nodes: list[redis.asyncio.Redis]):
        self.data, self.nodes = data, nodes

    @classmethod
    async def open(cls, url: str, cluster: bool) -> _Nodes:
        if not cluster:
            raw = redis.asyncio.Redis.from_url(url, decode_responses=True)
            return cls(raw, [raw])
        data = redis.asyncio.RedisCluster.from_url(url, decode_responses=True)
        await data.initialize()
        return cls(data, [redis.asyncio.Redis(host=n.host, port=int(n.port), decode_responses=True)
                          for n in data.get_primaries()])

    async def cpu_s(self) -> float:
        return sum([_cpu_s(await node.info("cpu")) for node in self.nodes])

    async def clear(self, pool: str) -> None:
        """Every key of `pool` and of its sub-pools, on every shard."""
        for node in self.nodes:
            async for key in node.scan_iter(match="le:{" + pool + "*", count=1000):
                await node.delete(key)

    async def aclose(self) -> None:
        for node in {id(n): n for n in (self.data, *self.nodes)}.values():
            await node.aclose()


async def _populate(client: PlacementClient, home: list[str], capacity: int, ttl_ms: int) -> None:
    for start in range(0, len(home), 500):
        batch = client.batch()
        for i in range(start, min(len(home), start + 500)):
            batch.heartbeat(home[i], pod_name(i), _record(i, capacity, 0), ttl_ms)
        await batch.send()


@dataclasses.dataclass(frozen=True, slots=True)
class Window:
    """One phase as Redis and the two processes saw it."""

    seconds: float
    cpu_s: float
    """Redis's main-thread CPU over the phase."""
    beats: int
    placed: int
    fewest_members: int
    """The smallest `members` seen, sampled every 250 ms (-1: not sampled)."""


async def _window(redis_: _Nodes, seconds: float, beats: tuple[Any, ...], placed: Any,
                  members: list[str] | None = None) -> Window:
    cpu0, t0, beats0, placed0 = await redis_.cpu_s(), time.perf_counter(), sum(b.value for b in beats), placed.value
    fewest = -1
    while (left := t0 + seconds - time.perf_counter()) > 0:
        await asyncio.sleep(min(0.25, left))
        if members is not None:
            n = sum([await redis_.data.zcard(key) for key in members])
            fewest = n if fewest < 0 else min(fewest, n)
    cpu1, t1 = await redis_.cpu_s(), time.perf_counter()
    return Window(t1 - t0, cpu1 - cpu0, sum(b.value for b in beats) - beats0, placed.value - placed0, fewest)


def _costs(plan: Plan, warm: Window, placing: Window, shards: int) -> dict[str, Any]:
    """Redis CPU per heartbeat (the heartbeats-only phase), per placement (the placing phase less its
    heartbeats at that cost), and the placements/s the Redis cores (one per shard, the sub-pools
    spread evenly) sustain with every pod beating at the real rate (`HEARTBEAT_MS`), whatever rate this
    machine's simulator reached."""
    per_beat = warm.cpu_s / warm.beats if warm.beats else None
    per_placement = ((placing.cpu_s - placing.beats * per_beat) / placing.placed
                     if per_beat is not None and placing.placed else None)
    real_beats_cpu = plan.pods * 1000 / HEARTBEAT_MS * per_beat if per_beat is not None else None
    ceiling = (round((shards - real_beats_cpu) / per_placement) if per_placement and per_placement > 0
               and real_beats_cpu is not None and real_beats_cpu < shards else None)
    return {
        "cpu_heartbeats_only": round(warm.cpu_s / warm.seconds, 3),
        "cpu_placing": round(placing.cpu_s / placing.seconds, 3),
        "heartbeats_per_s": {"target": plan.pods * 1000 // HEARTBEAT_MS,
                             "heartbeats_only": round(warm.beats / warm.seconds),
                             "placing": round(placing.beats / placing.seconds)},
        "cpu_us_per_heartbeat": None if per_beat is None else round(per_beat * 1e6, 1),
        "cpu_us_per_placement": None if per_placement is None else round(per_placement * 1e6, 1),
        "cpu_real_heartbeats": None if real_beats_cpu is None else round(real_beats_cpu, 3),
        "ceiling_placements_per_s": ceiling,
    }


async def _audit(client: PlacementClient, pools: list[str]) -> list[str]:
    """Pods holding more sessions (engine count + live leases) than their capacity."""
    return [f"{m.pod}: {m.record.active} + {m.reserved} > {m.record.capacity}"
            for pool in pools for m in (await client.snapshot(pool)).members
            if m.record.active + m.reserved > m.record.capacity]


async def _decision(plan: Plan) -> dict[str, Any]:
    """A placement decision alone (`place_among`: with sub-pools, their two totals read first),
    sequential, on a pool of `plan.pods` pods that always have room, next to PING.

    Redis's main-thread CPU per call, summed over the shards (the request's read, parse and reply
    included, as for a PING), and `INFO commandstats`' µs per script call (the script's own wall time:
    inflated when the machine is so busy that Redis is preempted mid-script)."""
    home = homes(DECISION_POOL, plan.pods, plan.subpools)
    redis_ = await _Nodes.open(plan.url, plan.cluster)
    try:
        async with PlacementClient(plan.url, timeout_ms=60_000, cluster=plan.cluster) as client:
            await _populate(client, home, 1_000_000, FAR_MS)
            for node in redis_.nodes:
                await node.config_resetstat()
            samples: list[int] = []
            cpu0 = await redis_.cpu_s()
            deadline = time.perf_counter() + DECISION_BUDGET_S
            while len(samples) < plan.decision_rounds and time.perf_counter() < deadline:
                t0 = time.perf_counter_ns()
                placed = await client.place_among(DECISION_POOL, plan.subpools, f"d{len(samples)}",
                                                  stale_ms=FAR_MS, lease_ms=FAR_MS)
                samples.append((time.perf_counter_ns() - t0) // 1000)
                assert isinstance(placed, Placed), placed
            cpu1 = await redis_.cpu_s()
            for _ in range(PINGS):
                await redis_.nodes[0].ping()
            cpu2 = await redis_.cpu_s()
            stats = [(await node.info("commandstats")).get("cmdstat_evalsha") for node in redis_.nodes]
            calls = sum(s["calls"] for s in stats if s)
            reads = {"summary": await _read_cost(redis_, lambda: client.summary(home[0])),
                     "snapshot": await _read_cost(redis_, lambda: client.snapshot(home[0]))}
            await redis_.clear(DECISION_POOL)
    finally:
        await redis_.aclose()
    decision_us = (cpu1 - cpu0) * 1e6 / len(samples)
    ping_us = (cpu2 - cpu1) * 1e6 / PINGS
    return {"rounds": len(samples), "redis_cpu_us": round(decision_us, 1), "ping_cpu_us": round(ping_us, 2),
            "pings_per_decision": round(decision_us / ping_us, 1),
            "script_us_per_call": round(sum(s["usec"] for s in stats if s) / calls, 2) if calls else None,
            "gateway_refresh": reads,
            "round_trip_ms": percentiles.summarize(samples[len(samples) // 10:]).as_dict()}


async def _read_cost(redis_: _Nodes, read: Callable[[], Awaitable[object]]) -> dict[str, float]:
    """A gateway's pool read (`summary`: what it refreshes now; `snapshot`: every pod, as it did), of
    the pool or its first sub-pool: Redis CPU and this process's CPU (the reply parsed, on the event
    loop) per read, up to 20 reads or 3 s; then the same reads again, and an idle spell, beside a
    task that yields at every turn of the loop (`_longest_turn_ms`)."""
    cpu0, mine0, t0, reads = await redis_.cpu_s(), time.process_time(), time.perf_counter(), 0
    while reads < 20 and time.perf_counter() - t0 < DECISION_BUDGET_S:
        await read()
        reads += 1
    mine1, cpu1, spent = time.process_time(), await redis_.cpu_s(), time.perf_counter() - t0
    blocked = await _longest_turn_ms(lambda: _reads(read, reads))
    quiet = await _longest_turn_ms(lambda: asyncio.sleep(spent))
    return {"reads": reads, "redis_ms": round((cpu1 - cpu0) * 1e3 / reads, 2),
            "client_ms": round((mine1 - mine0) * 1e3 / reads, 2), "loop_block_max_ms": blocked,
            "loop_block_max_ms_idle": quiet}


async def _reads(read: Callable[[], Awaitable[object]], n: int) -> None:
    for _ in range(n):
        await read()


async def _longest_turn_ms(work: Callable[[], Awaitable[object]]) -> float:
    """The longest the event loop went without a turn for a task that yields at every turn, while
    `work` runs: how long a relay's frame could wait behind it (with `work` only sleeping: the
    machine's own preemption, the floor)."""
    longest, running = 0.0, True

    async def yielder() -> None:
        nonlocal longest
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest, last = max(longest, now - last), now

    beside = asyncio.ensure_future(yielder())
    await work()
    running = False
    await beside
    return round(longest * 1e3, 2)


async def _orchestrate(plan: Plan) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    inbox, outbox = context.Pipe(duplex=False)
    live, stop = context.Event(), context.Event()
    ready = [context.Event(), context.Event(), context.Event()]
    beats, placed = context.Value("q", 0, lock=False), context.Value("q", 0, lock=False)
    probe_beats = context.Value("q", 0, lock=False)
    """The probe's beats, apart from the pods': two processes adding to one unlocked counter lose some."""
    results = context.Queue()
    home = homes(POOL, plan.pods, plan.subpools)
    pools = sorted(set(home))
    redis_ = await _Nodes.open(plan.url, plan.cluster)
    async with PlacementClient(plan.url, timeout_ms=60_000, cluster=plan.cluster) as client:
        await redis_.clear(POOL)
        await _populate(client, home, plan.capacity, 60_000)  # the pods' first beats are whole
        processes = [context.Process(target=run_pods, args=(plan, inbox, ready[0], stop, beats, results)),
                     context.Process(target=run_gateway, args=(plan, outbox, ready[1], live, stop, placed, results)),
                     context.Process(target=run_probe, args=(plan, ready[2], stop, probe_beats, results))]
        for process in processes:
            process.start()
        members = [pool_keys(pool).members for pool in pools]
        try:
            for event in ready:
                if not await asyncio.to_thread(event.wait, 120):
                    raise RuntimeError("a bench process did not start within 120 s")
            await asyncio.sleep(HEARTBEAT_MS / 1000)  # every pod's first, whole beat is behind us
            warm = await _window(redis_, plan.warm_s, (beats, probe_beats), placed)
            live.set()
            placing = await _window(redis_, plan.seconds, (beats, probe_beats), placed, members)
            stop.set()
            reports = dict([await asyncio.to_thread(results.get, True, 120) for _ in processes])
        finally:
            stop.set()
            live.set()
            for process in processes:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
        await asyncio.sleep(0.05)
        over_cap = await _audit(client, pools)
        await redis_.clear(POOL)
    shards = len(redis_.nodes)
    await redis_.aclose()
    pods: PodsReport = reports["pods"]
    gateway: GatewayReport = reports["gateway"]
    rate = gateway.placed / gateway.seconds if gateway.seconds else 0.0
    return {
        "pods": plan.pods, "capacity": plan.capacity, "target_rate": plan.rate, "hold_s": plan.hold_s,
        "subpools": plan.subpools, "shards": shards,
        "concurrency": plan.concurrency, "seconds": round(gateway.seconds, 2),
        "placements_per_s": round(rate, 1), "outcomes": {"placed": gateway.placed, "busy": gateway.busy},
        "place_ms": percentiles.summarize(gateway.place_us).as_dict(),
        "heartbeat_ms": percentiles.summarize(reports["probe"]).as_dict(),
        "pod_batch_ms": percentiles.summarize(pods.batch_us).as_dict(),
        "redis": _costs(plan, warm, placing, shards),
        "pods_process": {"heartbeats": pods.heartbeats, "accepted": pods.accepted, "ended": pods.ended,
                         "late_ticks": pods.late_ticks},
        "audit": {"overbooked": pods.overbooked, "over_cap": over_cap, "fewest_members": placing.fewest_members,
                  "members_expected": plan.pods + 1, "ok": pods.overbooked == 0 and not over_cap},
        "decision": await _decision(plan),
    }


def measure(plan: Plan) -> dict[str, Any]:
    """The whole simulated run against `plan.url`; the pools it writes are removed afterwards."""
    return loop.run(_orchestrate(plan))
