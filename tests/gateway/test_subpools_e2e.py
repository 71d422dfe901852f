"""Sub-pools end to end on a real 3-shard Redis Cluster: sim pods heartbeat into the sub-pools their
names hash to (`serve --subpools`), the gateway learns the count from the route (`subpools.route`, as
the operator writes it), places across both sub-pools, and gives a refused dial's slot back in the
sub-pool that holds it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import urllib.request
from pathlib import Path

import orjson
import pytest
import redis
import websockets

from liveplex.placement import PlacementClient, pool_keys, subpools
from liveplex.placement.local_redis import LocalCluster
from tests.support import platform, pods
from tests.support.clients import START, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]  # a cluster forms in ~2 s, three pods and a gateway start

POOL = platform.POOL
COUNT = 2
MODEL = START["session"]["model"]


def _names() -> tuple[str, str, str]:
    """Pods `a` in sub-pool 0, `b` and `v` in sub-pool 1 (CRC-32 of the name, as every process computes it)."""
    by_sub: dict[int, list[str]] = {0: [], 1: []}
    for i in range(64):
        name = f"pod-{i}"
        by_sub[subpools.names(POOL, COUNT).index(subpools.of(POOL, name, COUNT))].append(name)
    return by_sub[0][0], by_sub[1][0], by_sub[1][1]


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metrics(gateway: pods.Running) -> str:
    with urllib.request.urlopen(gateway.admin_root + "/metrics", timeout=5) as response:
        return response.read().decode()


def _record(node: redis.RedisCluster, pool: str, pod: str) -> dict[str, str]:
    return node.hgetall(pool_keys(pool).pod(pod))  # type: ignore[return-value]


def test_sessions_spread_over_two_sub_pools_and_a_refused_dial_gives_back_its_own_slot(tmp_path: Path) -> None:
    a, b, v = _names()
    sub_a, sub_b = subpools.names(POOL, COUNT)
    with LocalCluster(shards=3) as cluster, contextlib.ExitStack() as stack:
        url = "redis+cluster://" + cluster.url.removeprefix("redis://")

        async def route() -> None:
            async with PlacementClient(url) as client:  # what the operator writes for spec.placement.subPools 2
                await client.set_route(MODEL, subpools.route(POOL, COUNT))
        asyncio.run(route())
        node = stack.enter_context(redis.RedisCluster.from_url(cluster.url, decode_responses=True))

        def pod(name: str, *flags: str) -> None:
            stack.enter_context(pods.subprocess_pod("--redis-url", url, "--pool", POOL, "--subpools", str(COUNT),
                                                    "--pod-name", name, "--max-sessions", "1",
                                                    "--lateness-budget-ms", "1000", *flags,
                                                    log=tmp_path / f"{name}.log"))

        pod(a)
        pod(b)
        gateway, _ = stack.enter_context(pods.subprocess_pod("--redis-url", url, "--pool", POOL,
                                                             log=tmp_path / "gateway.log", command="gateway"))
        stats = lambda: platform.get_json(gateway.admin_root + "/live/stats")  # noqa: E731
        platform.eventually(lambda: stats()["pods"] == 2, "the gateway to see both pods through their sub-pools")
        assert not node.exists(pool_keys(POOL).members), "no pod heartbeats into the unsplit pool"

        async def scenario() -> None:
            sockets = []
            for _ in range(2):  # one slot per pod: the second must go to the other sub-pool
                ws = await websockets.connect(gateway.ws_url, max_queue=None)
                await ws.send(orjson.dumps(START).decode())
                await until(ws, "session.started")
                sockets.append(ws)
            platform.eventually(lambda: [_record(node, sub_a, a).get("active"), _record(node, sub_b, b).get("active")]
                                == ["1", "1"], "each pod's session counted in its own sub-pool")

            # v shares b's sub-pool and advertises a port nobody listens on: the only room left is on v
            pod(v, "--advertise", f"ws://127.0.0.1:{_dead_port()}")
            platform.eventually(lambda: stats()["pods"] == 3, "the gateway to see the third pod")
            ws = await websockets.connect(gateway.ws_url, max_queue=None)
            await ws.send(orjson.dumps(START).decode())
            error, _ = await until(ws, "error")
            assert error["error"]["code"] == "server_error"  # no engine reached: v refused, the rest full
            failures = f'liveplex_gateway_upstream_connect_failures_total{{upstream="{v}"}} 1.0'
            assert failures in _metrics(gateway), "the gateway placed on v (in sub-pool 1) and its dial was refused"
            resv = pool_keys(sub_b).resv(v)
            assert node.zcard(resv) == 0, "the refused dial's lease was given back in v's sub-pool, at once"
            for sock in (*sockets, ws):
                await sock.close()

        asyncio.run(scenario())

