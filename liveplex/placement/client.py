"""`PlacementClient`: the asyncio shell over Redis that engine pods, gateways and the operator share.

It owns the connection, the scripts and the translation of every Redis failure into
`errors.PlacementError`; the decisions live in the Lua scripts and their pure twins (`choice`,
`load`). Scripts are registered once and run by `EVALSHA`, reloaded by redis-py on `NOSCRIPT`
(after a Redis restart or `SCRIPT FLUSH`). Every call is bounded by `timeout_ms`: the socket timeouts
bound each read and connect, and an overall deadline bounds the call with its one retry.

With `cluster=True` the client speaks to a Redis Cluster (each script's keys share one pool's hash
tag, so each runs on the shard holding that slot); a pool split into sub-pools is placed on with
`place_among` (`subpools`).
"""

from __future__ import annotations

import asyncio
import importlib.resources
import random
import time
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import orjson
import redis.asyncio
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript

from liveplex.placement import choice, errors, keys, load, record, snapshot, subpools, timing
from liveplex.placement import url as urls

T = TypeVar("T")
_Replies = list["str | None"]
"""What redis-py's stubs type as `bytes | str` is `str` here: every client decodes (`decode_responses`)."""

_UNAVAILABLE = (
    redis.exceptions.ConnectionError,  # refused, reset, auth, still loading its dataset
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,  # a replica after failover
    redis.exceptions.ClusterDownError,
    redis.exceptions.RedisClusterException,  # no node of the cluster reachable (not a RedisError)
    redis.exceptions.TryAgainError,
    TimeoutError,  # our own deadline
    OSError,
)


@dataclass(frozen=True, slots=True)
class _Call:
    """One script run, built once and sent alone or in a `Batch`."""

    script: AsyncScript
    keys: list[str]
    args: list[Any]


def _source(name: str, *prelude: str) -> str:
    lua = importlib.resources.files("liveplex.placement").joinpath("lua")
    return "".join(lua.joinpath(part).read_text() for part in ("now.lua", *prelude, name))


SUMMARY_CANDIDATES = 16
"""How many of a pool's best pods a summary carries: fail-open placement's choice, excluded ones included."""

_WRITER = "index.lua"
"""Prepended to every script that changes a pod: the index it keeps (see `keys.PoolKeys.index`)."""


class PlacementClient:
    """Placement state of every pool in one Redis; safe to share between the tasks of one event loop."""

    def __init__(self, url: str, *, timeout_ms: int = 500, cluster: bool = False) -> None:
        """`url`: `redis://host:port/db` (or `rediss://`, `unix://`); with `cluster`, or a
        `redis+cluster://` URL (`url.cluster`), any node of a Redis Cluster. `timeout_ms`: the most one
        call may take."""
        url, named_cluster = urls.cluster(url)
        cluster = cluster or named_cluster
        self._timeout_s = timeout_ms / 1000
        self._cluster = cluster
        self._rng = random.Random()
        self._down: dict[str, float] = {}
        """Sub-pool -> monotonic s until which `place_among` leaves it out (its shard did not answer)."""
        common = {"decode_responses": True, "socket_timeout": self._timeout_s,
                  "socket_connect_timeout": self._timeout_s,
                  "retry": Retry(NoBackoff(), 1)}  # one reconnect after Redis closed a pooled connection
        self._redis: redis.asyncio.Redis | redis.asyncio.RedisCluster = (
            # a shard down leaves the others serving their slots (the servers need
            # cluster-require-full-coverage no as well); `retry` also bounds its retries after a topology change
            redis.asyncio.RedisCluster.from_url(url, require_full_coverage=False, **common)
            if cluster else redis.asyncio.Redis.from_url(url, **common))
        self._heartbeat = self._redis.register_script(_source("heartbeat.lua", _WRITER))
        self._settle = self._redis.register_script(_source("settle.lua", _WRITER))
        self._drain = self._redis.register_script(_source("drain.lua", _WRITER))
        self._remove = self._redis.register_script(_source("remove.lua", _WRITER))
        self._place = self._redis.register_script(_source("place.lua", _WRITER))
        self._snapshot = self._redis.register_script(_source("snapshot.lua"))
        self._summary = self._redis.register_script(_source("summary.lua", _WRITER))

    async def close(self) -> None:
        await self._redis.aclose()

    async def __aenter__(self) -> PlacementClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # --- engine pod side (platform §6.3) -------------------------------------------------------------

    async def heartbeat(self, pool: str, pod: str, record: record.PodRecord,
                        ttl_ms: int = timing.POD_TTL_MS, since: record.PodRecord | None = None) -> int | None:
        """Publish the pod's record, keep its hash alive for `ttl_ms` and mark it fresh (Redis TIME).

        With `since` (the record of the pod's last beat that landed) only what changed is sent, besides
        the four fields placement ranks by. Returns the pod's unexpired reservations at that instant:
        sessions placed on it that have not started yet, which the pod exports as
        `liveplex_engine_sessions_reserved` (platform §8's occupancy); None when `since` was given but Redis
        holds no record of the pod (it restarted, or the TTL ran out): nothing was written, and the
        caller sends the whole record (and whatever else Redis lost) at once."""
        reserved = await self._send(self._heartbeat_call(pool, pod, record, ttl_ms, since))
        return None if reserved < 0 else reserved

    def _heartbeat_call(self, pool: str, pod: str, record: record.PodRecord, ttl_ms: int,
                        since: record.PodRecord | None) -> _Call:
        k = keys.pool_keys(pool)
        whole, fields = record.changes(since)
        return _Call(self._heartbeat, k.index,
                     [k.pod_prefix, k.resv_prefix, keys.check_pod(pod), ttl_ms, "1" if whole else "0", *fields])

    async def accept(self, pool: str, pod: str, session_id: str, active: int) -> bool:
        """The engine started `session_id`: its lease becomes part of `active` in one step.

        `active` is the engine's count including this session. Returns whether the lease was still
        held (a session whose lease expired is still accepted when the engine's own cap allows).
        """
        return await self._settled(pool, pod, _session(session_id), _count(active))

    async def release(self, pool: str, pod: str, session_id: str, active: int) -> bool:
        """The engine refused reserved `session_id`: drop its lease and write the engine's `active`."""
        return await self._settled(pool, pod, _session(session_id), _count(active))

    async def set_active(self, pool: str, pod: str, active: int) -> None:
        """Write the engine's session count at once (a session ended), without waiting for a heartbeat."""
        await self._settled(pool, pod, "", _count(active))

    async def drain(self, pool: str, pod: str) -> None:
        """Placement skips `pod` from now on; the pod name is published on the pool's events channel."""
        k = keys.pool_keys(pool)
        await self._send(_Call(self._drain, k.index, [k.pod_prefix, k.resv_prefix, keys.check_pod(pod), k.events]))

    async def remove_pod(self, pool: str, pod: str) -> None:
        """A clean exit: the pod's hash, reservations and membership go at once instead of by TTL."""
        k = keys.pool_keys(pool)
        await self._send(_Call(self._remove, k.index, [k.pod_prefix, k.resv_prefix, keys.check_pod(pod)]))

    async def write_config(self, pool: str, config: Mapping[str, object]) -> None:
        """Store the pool's served description (`/live/config`) for gateways' early validation."""
        await self._run(self._redis.set(keys.pool_keys(pool).config, orjson.dumps(config)))

    # --- gateway side (platform §7) ------------------------------------------------------------------

    async def place(
        self,
        pool: str,
        session_id: str,
        exclude: Collection[str] = (),
        mode: choice.Mode = choice.Mode.SPREAD,
        *,
        lease_ms: int = timing.LEASE_MS,
        stale_ms: int = timing.STALE_MS,
        tiebreak: int | None = None,
    ) -> choice.Placed | choice.Busy:
        """Pick the best fresh pod with room and reserve a slot there for `lease_ms`, atomically.

        `tiebreak` picks among equally ranked pods (random when None; fixed in tests).
        """
        k = keys.pool_keys(pool)
        pick = random.getrandbits(31) if tiebreak is None else tiebreak
        args = [k.pod_prefix, k.resv_prefix, _session(session_id), lease_ms, stale_ms, pick,
                choice.Mode(mode).value, *exclude]
        reply = await self._send(_Call(self._place, k.index, args))
        if reply[0] == "placed":
            return choice.Placed(pod=reply[1], addr=reply[2], pool=k.name)
        return choice.Busy(total_capacity=reply[1], total_active=reply[2], no_engines=reply[3] == 1)

    async def place_among(
        self,
        pool: str,
        count: int,
        session_id: str,
        exclude: Collection[str] = (),
        mode: choice.Mode = choice.Mode.SPREAD,
        *,
        lease_ms: int = timing.LEASE_MS,
        stale_ms: int = timing.STALE_MS,
    ) -> choice.Placed | choice.Busy:
        """`place` on a pool split into `count` sub-pools: the better of two random ones by their totals,
        then the other, then the rest (`subpools.order`); a full sub-pool or an unreachable shard moves
        on to the next. `Placed.pool` is the sub-pool placed in (where the lease is: `unreserve` there);
        Busy with the summed totals when every reachable one was full; raises `RedisUnavailable` only
        when none could be reached. With `count` 1 it is `place` on the pool."""
        names = subpools.names(pool, count)
        if count == 1:
            return await self.place(names[0], session_id, exclude, mode, lease_ms=lease_ms, stale_ms=stale_ms)
        now = time.monotonic()
        down = {k for k, name in enumerate(names) if self._down.get(name, 0.0) > now}
        picked = subpools.pair(count, self._rng, down)
        totals = await asyncio.gather(*(self.totals(names[k]) for k in picked), return_exceptions=True)
        for k, answer in zip(picked, totals):
            if isinstance(answer, errors.RedisUnavailable):
                self._trip(names[k])
            elif isinstance(answer, BaseException):
                raise answer
        readable = [t if isinstance(t, subpools.Totals) else None for t in totals]
        busy: list[choice.Busy] = []
        unavailable: errors.RedisUnavailable | None = None
        for k in subpools.order(count, picked, readable, mode, self._rng, down):
            try:
                answer = await self.place(names[k], session_id, exclude, mode, lease_ms=lease_ms, stale_ms=stale_ms)
            except errors.RedisUnavailable as exc:
                self._trip(names[k])
                unavailable = exc
                continue
            if isinstance(answer, choice.Placed):
                return answer
            busy.append(answer)
        if busy:
            return subpools.merge_busy(busy)
        raise unavailable or errors.RedisUnavailable(f"every sub-pool of {pool} is on a shard that did not answer")

    def _trip(self, subpool: str) -> None:
        self._down[subpool] = time.monotonic() + timing.SHARD_BREAKER_MS / 1000

    async def totals(self, pool: str) -> subpools.Totals:
        """The pool's (or sub-pool's) slots, sessions and leases, from its index: one `HMGET`, O(1)."""
        fields = await self._run(self._redis.hmget(keys.pool_keys(pool).totals, subpools.FIELDS))
        return subpools.Totals.of(cast(_Replies, fields))

    async def unreserve(self, pool: str, pod: str, session_id: str) -> bool:
        """Give back a reservation the gateway could not use (connect failed); returns whether it was held."""
        return await self._settled(pool, pod, _session(session_id), "")

    async def route(self, model: str) -> str | None:
        """The route of `model` (`subpools.routed` reads it), or None when no LiveEngine routes it."""
        return cast("str | None", await self._run(self._redis.hget(keys.ROUTES, keys.check_model(model))))

    async def read_config(self, pool: str) -> dict[str, object] | None:
        """The pool's served description, or None when no engine has written one."""
        raw = await self._run(self._redis.get(keys.pool_keys(pool).config))
        if raw is None:
            return None
        try:
            config = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise errors.InvalidRecord("config", raw, "not JSON") from None
        if not isinstance(config, dict):
            raise errors.InvalidRecord("config", raw, "not a JSON object")
        return config

    # --- operator side (platform §4, §8) -------------------------------------------------------------

    async def set_route(self, model: str, route: str) -> None:
        """Route `model` to `route`: a pool's name, or `subpools.route`'s for a split pool."""
        subpools.routed(route)
        await self._run(self._redis.hset(keys.ROUTES, keys.check_model(model), route))

    async def remove_route(self, model: str) -> None:
        await self._run(self._redis.hdel(keys.ROUTES, keys.check_model(model)))

    async def routes(self) -> dict[str, str]:
        """Every model -> pool route, as stored (`subpools.routed` reads a split pool's)."""
        return cast("dict[str, str]", await self._run(self._redis.hgetall(keys.ROUTES)))

    async def snapshot(self, pool: str) -> snapshot.Snapshot:
        """The pool at one Redis instant, stale members included (see `Snapshot.fresh`)."""
        k = keys.pool_keys(pool)
        reply = await self._send(_Call(self._snapshot, [k.members], [k.pod_prefix, k.resv_prefix]))
        return snapshot.Snapshot(now_ms=reply[0], members=_members(reply[1:]))

    async def summary(self, pool: str, candidates: int = SUMMARY_CANDIDATES,
                      stale_ms: int = timing.STALE_MS) -> load.Summary:
        """The pool's totals and its best `candidates` pods (spread order), in O(candidates · log N).

        What a gateway refreshes every second: `load` has the totals (kept by the index: sessions and
        slots exact, `degraded` counts degraded pods with room, the worst tick p99 is the candidates'),
        `members` are enough for fail-open placement (platform §7.12) without reading every pod."""
        k = keys.pool_keys(pool)
        reply = await self._send(_Call(self._summary, k.index, [k.pod_prefix, k.resv_prefix, stale_ms, candidates]))
        members = _members(reply[2:])
        capacity, active, engines, reserved, draining, draining_active, degraded = reply[1]
        totals = load.PoolLoad(
            pods=engines + draining, fresh=engines + draining, draining=draining, degraded=degraded,
            active=active + draining_active, reserved=reserved, capacity=capacity,
            worst_tick_p99_us=max((m.record.tick_p99_us for m in members), default=0))
        return load.Summary(snapshot.Snapshot(now_ms=reply[0], members=members), totals)

    async def summary_among(self, pool: str, count: int, candidates: int = SUMMARY_CANDIDATES,
                            stale_ms: int = timing.STALE_MS) -> load.Summary:
        """`summary` of a pool split into `count` sub-pools: theirs, read concurrently and merged
        (`subpools.merge_summaries`), O(count · candidates · log N). A sub-pool whose shard does not
        answer is left out (the totals then cover the others: its pods cannot heartbeat either);
        raises only when none answered. With `count` 1 it is `summary` of the pool."""
        names = subpools.names(pool, count)
        if count == 1:
            return await self.summary(names[0], candidates, stale_ms)
        parts = await asyncio.gather(*(self.summary(name, candidates, stale_ms) for name in names),
                                     return_exceptions=True)
        read = [p for p in parts if isinstance(p, load.Summary)]
        for part in parts:
            if isinstance(part, BaseException) and not isinstance(part, errors.RedisUnavailable):
                raise part
        if not read:
            raise errors.RedisUnavailable(f"every sub-pool of {pool} is on a shard that did not answer")
        return subpools.merge_summaries(read)

    async def load(self, pool: str, stale_ms: int = timing.STALE_MS) -> load.PoolLoad:
        return load.PoolLoad.of(await self.snapshot(pool), stale_ms)

    # --- the edge -------------------------------------------------------------------------------------

    async def load_scripts(self) -> None:
        """Load every script on the server (every primary of a cluster), for a caller that sends
        `Batch.commands` as `EVALSHA` on its own connections."""
        for script in (self._heartbeat, self._settle, self._drain, self._remove, self._place, self._snapshot,
                       self._summary):
            await self._run(self._redis.script_load(script.script))

    def batch(self) -> Batch:
        """Engine-side writes queued here and sent in one round trip, applied in order."""
        return Batch(self)

    def _settle_call(self, pool: str, pod: str, session_id: str, active: int | str) -> _Call:
        k = keys.pool_keys(pool)
        return _Call(self._settle, k.index, [k.pod_prefix, k.resv_prefix, keys.check_pod(pod), session_id, active])

    async def _settled(self, pool: str, pod: str, session_id: str, active: int | str) -> bool:
        return await self._send(self._settle_call(pool, pod, session_id, active)) == 1

    async def _send(self, call: _Call) -> Any:
        return await self._run(self._eval(call))

    async def _eval(self, call: _Call) -> Any:
        if not self._cluster:
            return await call.script(keys=call.keys, args=call.args)
        # redis-py loads a missing script on every primary, which fails while any shard is down: a
        # script the shard lacks (it restarted, or never ran it) goes as EVAL to that shard alone
        try:
            return await self._redis.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
        except redis.exceptions.NoScriptError:
            return await self._redis.eval(cast(str, call.script.script), len(call.keys), *call.keys, *call.args)

    async def _send_all(self, calls: list[_Call]) -> list[Any]:
        if self._cluster:  # a cluster pipeline refuses scripts: one call after another, in order
            return [await self._send(call) for call in calls]
        pipe = self._redis.pipeline(transaction=False)
        for call in calls:
            # queued, not sent
            await call.script(keys=call.keys, args=call.args, client=pipe)  # type: ignore[arg-type]  # redis: typed for clients, documented for pipelines
        return await self._run(pipe.execute())

    async def hold_call(self, session_id: str, url: str, ttl_s: int) -> None:
        """Record that the gateway at `url` holds WebRTC call `session_id` (for at most `ttl_s`)."""
        await self._run(self._redis.set(keys.CALL_PREFIX + session_id, url, ex=ttl_s))

    async def call_holder(self, session_id: str) -> str | None:
        """The URL of the gateway holding WebRTC call `session_id`, if one recorded it."""
        return cast("str | None", await self._run(self._redis.get(keys.CALL_PREFIX + session_id)))

    async def forget_call(self, session_id: str) -> None:
        await self._run(self._redis.delete(keys.CALL_PREFIX + session_id))

    async def hold_session(self, session_id: str, record: str, ttl_s: int) -> None:
        """Record where relayed session `session_id` runs (`record`, JSON opaque here), for `ttl_s`."""
        await self._run(self._redis.set(keys.SESSION_PREFIX + session_id, record, ex=ttl_s))

    async def session_holder(self, session_id: str) -> str | None:
        """The record of relayed session `session_id`, if a gateway kept one."""
        return cast("str | None", await self._run(self._redis.get(keys.SESSION_PREFIX + session_id)))

    async def forget_session(self, session_id: str) -> None:
        await self._run(self._redis.delete(keys.SESSION_PREFIX + session_id))

    async def _run(self, call: Awaitable[T]) -> T:
        """Await one Redis call under the deadline; the only place redis-py errors become ours."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return await call
        except _UNAVAILABLE as exc:
            raise errors.RedisUnavailable(f"Redis unavailable: {type(exc).__name__}: {exc}") from exc
        except redis.exceptions.RedisError as exc:
            raise errors.RedisRefused(f"Redis refused: {exc}") from exc


class Batch:
    """Heartbeats and settles of many pods in one round trip, in the order queued (not atomic as a whole).

    For a process that speaks for many pods at once: the `bench place` pool simulator, a node agent.
    Each queued call is checked as the single call would be, before anything is sent."""

    def __init__(self, client: PlacementClient) -> None:
        self._client = client
        self._calls: list[_Call] = []

    def __len__(self) -> int:
        return len(self._calls)

    def heartbeat(self, pool: str, pod: str, record: record.PodRecord, ttl_ms: int = timing.POD_TTL_MS,
                  since: record.PodRecord | None = None) -> None:
        """Its answer in `send`: the reservations, or -1 when `since` was given and the record is gone."""
        self._calls.append(self._client._heartbeat_call(pool, pod, record, ttl_ms, since))

    def accept(self, pool: str, pod: str, session_id: str, active: int) -> None:
        self._calls.append(self._client._settle_call(pool, pod, _session(session_id), _count(active)))

    def release(self, pool: str, pod: str, session_id: str, active: int) -> None:
        self._calls.append(self._client._settle_call(pool, pod, _session(session_id), _count(active)))

    def set_active(self, pool: str, pod: str, active: int) -> None:
        self._calls.append(self._client._settle_call(pool, pod, "", _count(active)))

    def commands(self) -> list[list[Any]]:
        """The queued calls as Redis commands (`EVALSHA sha numkeys keys... args...`), and empties the batch:
        for a caller with its own connection (the pool simulator, whose pods' beats outrun redis-py)."""
        calls, self._calls = self._calls, []
        return [["EVALSHA", c.script.sha, len(c.keys), *c.keys, *c.args] for c in calls]

    async def send(self) -> list[Any]:
        """Each call's answer, in order (a heartbeat's live reservations, a settle's 1/0); empties the batch."""
        calls, self._calls = self._calls, []
        return await self._client._send_all(calls) if calls else []


def _members(rows: list[Any]) -> tuple[snapshot.Member, ...]:
    """`snapshot.lua`'s and `summary.lua`'s rows: pod, heartbeat, live leases, the hash as a JSON array."""
    members = []
    for pod, score, reserved, fields in rows:
        flat = orjson.loads(fields)
        members.append(snapshot.Member(pod=pod, record=record.PodRecord.from_hash(dict(zip(flat[::2], flat[1::2]))),
                                       heartbeat_ms=int(float(score)), reserved=reserved))
    return tuple(members)


def _session(session_id: str) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise errors.InvalidName("session_id", session_id, "a session id is a non-empty string")
    return session_id


def _count(active: int) -> int:
    if not isinstance(active, int) or active < 0:
        raise errors.InvalidRecord("active", active, "a session count is a non-negative integer")
    return active
