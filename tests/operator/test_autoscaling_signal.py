"""The autoscaling signal end to end, short of a real HPA controller: real sim pods in a real Redis
pool carry real sessions and reservations; their real `/metrics` are scraped; the HPA rendered
from a LiveEngine stored in the emulator is applied by the test-side controller (`hpa.Autoscaler`)
to the LiveEngine's scale subresource there. Load goes up: replicas go up (counting the
reservations); load stops: after the stabilisation window replicas come down one pod per period."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
import orjson
import pytest
import websockets

from liveplex.emulator import Emulator
from liveplex.operator import crd, names, render, spec
from liveplex.placement import PlacementClient
from tests.operator import hpa
from tests.support import pods

pytestmark = pytest.mark.timeout(120)

NS, NAME = "default", "pp"
POOL = names.pool(NS, NAME)
SYNC_S = 0.25
"""The test controller's sync period (the HPA's is 15 s)."""
WINDOW_S, PERIOD_S = 2, 1
LE = f"/apis/{names.API_VERSION}/namespaces/{NS}/{names.PLURAL}/{NAME}"
HPA = f"/apis/{names.HPA[0]}/namespaces/{NS}/horizontalpodautoscalers"
MERGE = {"Content-Type": "application/merge-patch+json"}
START = orjson.dumps({"type": "session.start", "session": {"model": "gpt-live-1"}}).decode()
BODY = {
    "apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": NAME, "namespace": NS},
    "spec": {"replicas": 1, "engine": {"kind": "sim"}, "capacity": {"maxSessions": 4},
             "autoscaling": {"enabled": True, "provider": "hpa", "minReplicas": 1, "maxReplicas": 4,
                             "targetOccupancyPercent": 50, "scaleDownStabilizationSeconds": WINDOW_S,
                             "scaleDownPeriodSeconds": PERIOD_S}},
}


async def _scrape(http: httpx.AsyncClient, pods_: list[pods.Running]) -> list[tuple[float, float]]:
    """Each pod's (active, reserved) gauges from its `/metrics` (on its admin listener)."""
    out = []
    for pod in pods_:
        gauges = {}
        for line in (await http.get(pod.admin_root + "/metrics")).text.splitlines():
            name, _, value = line.partition(" ")
            if name in ("liveplex_engine_sessions_active", "liveplex_engine_sessions_reserved"):
                gauges[name] = float(value)
        out.append((gauges["liveplex_engine_sessions_active"], gauges["liveplex_engine_sessions_reserved"]))
    return out


def _occupied(scraped: list[tuple[float, float]]) -> list[float]:
    """What prometheus-adapter's `liveplex_engine_sessions_occupied` rule computes per pod."""
    return [active + reserved for active, reserved in scraped]


class Controller:
    """Scrape, compute, write `/scale`: one HPA sync every `SYNC_S`, recording each write."""

    def __init__(self, api: httpx.AsyncClient, pods_: list[pods.Running], autoscaler: hpa.Autoscaler) -> None:
        self.api, self.pods, self.autoscaler = api, pods_, autoscaler
        self.writes: list[tuple[float, int, float]] = []
        """(time, replicas written, reservations the scrape saw)."""
        self.seen: list[tuple[float, list[tuple[float, float]], int]] = []
        """(time, each pod's (active, reserved), the recommendation before stabilisation)."""
        self.syncs = 0

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=5) as scraper:
            while True:
                scraped = await _scrape(scraper, self.pods)
                scale = (await self.api.get(f"{LE}/scale")).json()
                now = time.monotonic()
                current = scale["spec"]["replicas"]
                desired = self.autoscaler.desired(now, current, _occupied(scraped))
                if desired != current:
                    answer = await self.api.patch(f"{LE}/scale", headers=MERGE, json={"spec": {"replicas": desired}})
                    answer.raise_for_status()
                    self.writes.append((now, desired, sum(r for _, r in scraped)))
                self.seen.append((now, scraped, self.autoscaler.recommendations[-1][1]))
                self.syncs += 1
                await asyncio.sleep(SYNC_S)

    async def replicas(self) -> int:
        return (await self.api.get(LE)).json()["spec"]["replicas"]

    async def until(self, replicas: int, deadline_s: float = 15.0) -> None:
        async with asyncio.timeout(deadline_s):
            while await self.replicas() != replicas:
                await asyncio.sleep(SYNC_S / 2)


async def _session(root: str) -> websockets.ClientConnection:
    ws = await websockets.connect(f"ws://{root.removeprefix('http://')}/v1/live/sessions", close_timeout=2)
    await ws.send(START)
    async with asyncio.timeout(10):
        while orjson.loads(await ws.recv())["type"] != "session.started":
            pass
    return ws


def test_load_scales_the_liveengine_up_and_its_end_scales_it_down_one_pod_per_period(
        redis_url: str, tmp_path: Path) -> None:
    with contextlib.ExitStack() as procs:
        running = [procs.enter_context(pods.subprocess_pod(
            "--redis-url", redis_url, "--pool", POOL, "--pod-name", f"pod-{i}", "--max-sessions", "4",
            log=tmp_path / f"pod-{i}.log"))[0] for i in range(2)]
        asyncio.run(_scenario(tmp_path, running, redis_url))


async def _scenario(tmp_path: Path, running: list[pods.Running], redis_url: str) -> None:
    emulator = Emulator(tmp_path / "cluster", kubelet=False, controllers=False)
    await emulator.start()
    try:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=10, verify=emulator.tls(),
                                     headers={"Authorization": f"Bearer {emulator.admin_token}"}) as api, \
                PlacementClient(redis_url) as placement:
            (await api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd.render_crd())
             ).raise_for_status()
            (await api.post(LE.rsplit("/", 1)[0], json=BODY)).raise_for_status()
            stored = (await api.get(LE)).json()
            rendered = render.render_hpa(spec.parse(stored))
            (await api.post(HPA, json=rendered)).raise_for_status()
            hpa_obj = (await api.get(f"{HPA}/{NAME}")).json()
            assert hpa_obj["spec"]["scaleTargetRef"] == {"apiVersion": names.API_VERSION, "kind": names.KIND,
                                                         "name": NAME}
            controller = Controller(api, running, hpa.Autoscaler.of(hpa_obj))
            assert controller.autoscaler.target == 2.0  # 4 sessions x 50 %
            async with asyncio.timeout(15):
                while len((await placement.snapshot(POOL)).fresh()) < 2:
                    await asyncio.sleep(0.05)
            task = asyncio.create_task(controller.run())
            try:
                await _drive(controller, placement)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    finally:
        await emulator.stop()


async def _drive(controller: Controller, placement: PlacementClient) -> None:
    async with asyncio.timeout(10):
        while controller.syncs < 4:
            await asyncio.sleep(SYNC_S)
    assert await controller.replicas() == 1 and controller.writes == []  # idle pods: stay at minReplicas

    sockets = [await _session(pod.root) for pod in controller.pods[:1] * 3 + controller.pods[1:] * 2]
    try:
        await controller.until(3)
        # 5 running sessions alone: average 2.5 against 2, ceil(2 x 1.25) = 3 pods. With two
        # reservations the average is 3.5 and the recommendation ceil(2 x 1.75) = 4: only counting
        # liveplex_engine_sessions_reserved reaches 4.
        await asyncio.sleep(4 * SYNC_S)
        assert await controller.replicas() == 3
        placed = [await placement.place(POOL, f"sess_{i}") for i in range(2)]
        await controller.until(4)
        ups = [(r, reserved) for _, r, reserved in controller.writes]
        assert [r for r, _ in ups] == sorted(r for r, _ in ups) and ups[-1] == (4, 2)
        assert all(reserved == 0 for r, reserved in ups if r < 4)  # no stabilisation on the way up
        assert max(sum(_occupied(scraped)) for _, scraped, _ in controller.seen) == 7
        for i, p in enumerate(placed):
            assert await placement.unreserve(POOL, p.pod, f"sess_{i}")
    finally:
        stopped = time.monotonic()  # the load stops: the pods end the sessions at their next tick
        await asyncio.gather(*(ws.close() for ws in sockets))

    await controller.until(1, deadline_s=WINDOW_S + 3 * PERIOD_S + 10)
    downs = [(t, r) for t, r, _ in controller.writes if t > stopped]
    assert [r for _, r in downs] == [3, 2, 1]
    last_high = max(t for t, _, recommended in controller.seen if recommended >= 4)
    assert downs[0][0] - last_high >= WINDOW_S - SYNC_S  # the stabilisation window held the count
    assert any(sum(_occupied(scraped)) == 0 for t, scraped, _ in controller.seen if t > stopped)
    gaps = [b - a for (a, _), (b, _) in zip(downs, downs[1:])]
    assert all(gap >= PERIOD_S for gap in gaps), gaps
