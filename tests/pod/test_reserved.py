"""`liveplex_engine_sessions_reserved`: a pod exports the reservations Redis holds for it, read in its heartbeat."""

from __future__ import annotations

import asyncio

import httpx

from liveplex.gptlive.server import hop
from liveplex.placement import PlacementClient, choice
from tests.support import clients, pods

POOL = "test/reserved"


async def _gauges(root: str) -> dict[str, float]:
    async with httpx.AsyncClient() as http:
        text = (await http.get(root + "/metrics", timeout=5)).text
    return {name: float(value) for name, value in (line.split(" ", 1) for line in text.splitlines()
                                                   if line.startswith("liveplex_engine_sessions_"))}


async def _until(root: str, name: str, value: float, deadline_s: float = 10.0) -> dict[str, float]:
    """The pod's gauges once `name` reads `value` (a heartbeat is 500 ms)."""
    async with asyncio.timeout(deadline_s):
        while (gauges := await _gauges(root)).get(name) != value:
            await asyncio.sleep(0.05)
    return gauges


async def test_the_pod_exports_its_unstarted_reservations_and_drops_one_when_it_starts(redis_url: str) -> None:
    # The advertised address is never dialled here: placement only needs the pod in its pool.
    async with pods.in_process("--redis-url", redis_url, "--pool", POOL, "--pod-name", "pod-a",
                               "--advertise", "ws://127.0.0.1:9") as pod, PlacementClient(redis_url) as placement:
        async with asyncio.timeout(10):
            while not (await placement.snapshot(POOL)).members:
                await asyncio.sleep(0.05)
        placed = [await placement.place(POOL, f"sess_{i}") for i in range(3)]
        assert all(isinstance(p, choice.Placed) and p.pod == "pod-a" for p in placed)
        reserved = await _until(pod.admin_root, "liveplex_engine_sessions_reserved", 3.0)
        assert reserved["liveplex_engine_sessions_active"] == 0

        ws, _ = await clients.started(pod.ws_url, {hop.SESSION_ID_HEADER: "sess_1"})
        async with ws:  # its events left unread, then a close frame (tests/pod/test_client_close.py)
            gauges = await _until(pod.admin_root, "liveplex_engine_sessions_reserved", 2.0)
            assert gauges["liveplex_engine_sessions_active"] <= 1
        assert await placement.unreserve(POOL, "pod-a", "sess_0")
        await _until(pod.admin_root, "liveplex_engine_sessions_reserved", 1.0)
