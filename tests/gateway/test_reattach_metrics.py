"""A gateway's re-attach, observed (docs/observability.md): `liveplex_gateway_handed_back_total` (a
draining gateway leaves its calls on their pods) and `liveplex_gateway_reattaches_total{result}`
(a caller continuing through another replica, or refused), with the pod's side of the same call
(`liveplex_engine_reattaches_total`, `liveplex_engine_reattach_gap_seconds`).

Real processes: Redis, a sim pod, two gateways; raw sockets as the caller.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import orjson
import pytest
import websockets
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from liveplex.gateway.metrics import GatewayCollector
from liveplex.gateway.stats import REATTACH_RESULTS, GatewayStats
from liveplex.gptlive.server.stats import FrontStats
from tests.support import clients, platform, pods
from tests.support.exposition import misnamed

pytestmark = pytest.mark.timeout(120)


def test_the_reattach_series_are_exported_from_zero() -> None:
    registry = CollectorRegistry()
    registry.register(GatewayCollector(GatewayStats(), FrontStats()))
    text = generate_latest(registry).decode()
    for result in REATTACH_RESULTS:
        assert f'liveplex_gateway_reattaches_total{{result="{result}"}} 0.0' in text
    assert "liveplex_gateway_handed_back_total 0.0" in text
    assert misnamed(text) == []


def _samples(admin_root: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(admin_root + "/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _ws(gateway: pods.Running, **query: str) -> str:
    return gateway.ws_url + "?" + "&".join(f"{k}={v}" for k, v in query.items())


def test_a_drained_gateway_counts_its_calls_handed_back_and_the_next_its_reattaches(
        redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1) as running, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL,
                                log=tmp_path / "gateway-b.log", command="gateway") as (second, _):
        asyncio.run(_handed_back_and_reattached(running, second))


async def _handed_back_and_reattached(running: platform.Platform, second: pods.Running) -> None:
    first = running.gateway
    ws, started = await clients.started(first.ws_url)
    session_id = started["session"]["id"]
    drained = asyncio.create_task(asyncio.to_thread(
        lambda: urllib.request.urlopen(first.admin_root + "/drain", timeout=10).read()))
    with pytest.raises(websockets.ConnectionClosed):
        async with asyncio.timeout(5):
            while True:
                await ws.recv()
    assert ws.close_code == 1012
    await drained  # over at once: nothing was left to wait for
    gone = await asyncio.to_thread(_samples, first.admin_root)
    assert gone[("liveplex_gateway_handed_back_total", ())] == 1

    async with websockets.connect(_ws(second, session_id="sess_unknown")) as refused:
        assert orjson.loads(await refused.recv())["error"]["code"] == "session_not_found"
        with pytest.raises(websockets.ConnectionClosed):
            await refused.recv()
    again = await websockets.connect(_ws(second, session_id=session_id), max_queue=None)
    async with asyncio.timeout(5):
        while not (text := await again.recv()).startswith('{"type":"session.output_audio.delta"'):
            assert '"type":"error"' not in text
    seen = await asyncio.to_thread(_samples, second.admin_root)
    assert seen[("liveplex_gateway_reattaches_total", (("result", "reattached"),))] == 1
    assert seen[("liveplex_gateway_reattaches_total", (("result", "refused"),))] == 1
    assert seen[("liveplex_gateway_handed_back_total", ())] == 0

    pod = await asyncio.to_thread(_samples, running.pods[0][0].admin_root)
    assert pod[("liveplex_engine_reattaches_total", (("result", "parked"),))] == 1
    assert pod[("liveplex_engine_reattach_gap_seconds_count", ())] == 1
    assert pod[("liveplex_engine_sessions_parked", ())] == 0
    await again.close()
