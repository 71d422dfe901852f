"""A pod's re-attach, observed (docs/observability.md): `liveplex_engine_sessions_parked` (and
`/live/stats`' `parked`), `liveplex_engine_reattaches_total{result}`,
`liveplex_engine_parked_ended_total{reason}` and `liveplex_engine_reattach_gap_seconds`, through the
real paths: a real pod in this process, raw sockets playing the gateway (tests/pod/test_reattach.py).
"""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from liveplex.gptlive.server import hop
from liveplex.pod import stats
from tests.support import clients, exposition, pods


def _relay(session_id: str, **more: str) -> dict[str, str]:
    return {hop.SESSION_ID_HEADER: session_id, **more}


async def _samples(pod: pods.Running) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The pod's re-attach series: (sample name, labels) -> value."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(pod.admin_root + "/metrics", timeout=5)).text
    assert exposition.misnamed(text) == []
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            if family.name.startswith(("liveplex_engine_sessions_parked", "liveplex_engine_reattach",
                                       "liveplex_engine_parked_ended"))
            for s in family.samples}


def _get(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def _parked(pod: pods.Running) -> int:
    async with httpx.AsyncClient() as http:
        return (await http.get(pod.admin_root + "/live/stats", timeout=5)).json()["parked"]


async def _until_parked(pod: pods.Running, n: int, deadline_s: float = 5.0) -> None:
    async with asyncio.timeout(deadline_s):
        while await _parked(pod) != n:
            await asyncio.sleep(0.05)


async def test_a_fresh_pod_exports_every_reattach_series_from_zero() -> None:
    async with pods.in_process() as pod:
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_sessions_parked") == 0
        for result in stats.REATTACH_RESULTS:
            assert _get(samples, "liveplex_engine_reattaches_total", result=result) == 0
        for reason in stats.PARKED_ENDS:
            assert _get(samples, "liveplex_engine_parked_ended_total", reason=reason) == 0
        assert _get(samples, "liveplex_engine_reattach_gap_seconds_count") == 0
        assert await _parked(pod) == 0


async def test_a_park_and_its_reattach_are_counted_with_the_gap_between() -> None:
    async with pods.in_process("--reattach-grace-s", "10") as pod:
        ws, _ = await clients.started(pod.ws_url, _relay("sess_gap"))
        ws.transport.abort()  # the gateway died: no close frame
        await _until_parked(pod, 1)
        assert _get(await _samples(pod), "liveplex_engine_sessions_parked") == 1
        await asyncio.sleep(0.6)

        again = await websockets.connect(pod.ws_url, max_queue=None,
                                         additional_headers=_relay("sess_gap", **{hop.REATTACH_HEADER: ""}))
        assert orjson.loads(await again.recv())["type"] == hop.REATTACHED
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_sessions_parked") == 0 and await _parked(pod) == 0
        assert _get(samples, "liveplex_engine_reattaches_total", result="parked") == 1
        assert _get(samples, "liveplex_engine_reattaches_total", result="taken_over") == 0
        assert _get(samples, "liveplex_engine_reattach_gap_seconds_count") == 1
        gap = _get(samples, "liveplex_engine_reattach_gap_seconds_sum")
        assert 0.6 <= gap < 5
        assert _get(samples, "liveplex_engine_reattach_gap_seconds_bucket", le="0.5") == 0
        assert _get(samples, "liveplex_engine_reattach_gap_seconds_bucket", le="5.0") == 1

        # a half-open socket taken over: a re-attach, no park and no gap
        third = await websockets.connect(pod.ws_url, max_queue=None,
                                         additional_headers=_relay("sess_gap", **{hop.REATTACH_HEADER: ""}))
        assert orjson.loads(await third.recv())["type"] == hop.REATTACHED
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_reattaches_total", result="taken_over") == 1
        assert _get(samples, "liveplex_engine_reattach_gap_seconds_count") == 1

        await third.close(hop.ENDS_SESSION_CLOSE)  # its caller's end: over, not parked
        await again.close()
        async with asyncio.timeout(5):
            while await _stats_sessions(pod):
                await asyncio.sleep(0.05)
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_sessions_parked") == 0
        assert sum(v for (name, _), v in samples.items() if name == "liveplex_engine_parked_ended_total") == 0


async def test_an_unknown_session_is_a_not_found_reattach() -> None:
    async with pods.in_process("--reattach-grace-s", "10") as pod:
        with pytest.raises(websockets.InvalidStatus):
            await websockets.connect(pod.ws_url, additional_headers=_relay("sess_never", **{hop.REATTACH_HEADER: ""}))
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_reattaches_total", result="not_found") == 1
        assert _get(samples, "liveplex_engine_reattaches_total", result="parked") == 0


@pytest.mark.parametrize(("flags", "reason", "not_reason"), [
    (("--reattach-grace-s", "0.5"), "window_passed", "expired"),  # no caller came back
    (("--reattach-grace-s", "10", "--max-seconds", "1"), "expired", "window_passed"),  # maxSeconds, long before
], ids=["window passed", "expired while parked"])
async def test_a_parked_session_that_ends_is_a_parked_end_by_its_reason(flags: tuple[str, ...], reason: str,
                                                                        not_reason: str) -> None:
    async with pods.in_process(*flags) as pod:
        ws, _ = await clients.started(pod.ws_url, _relay("sess_gone"))
        ws.transport.abort()
        await _until_parked(pod, 1)
        await _until_parked(pod, 0)
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_parked_ended_total", reason=reason) == 1
        assert _get(samples, "liveplex_engine_parked_ended_total", reason=not_reason) == 0
        assert _get(samples, "liveplex_engine_sessions_parked") == 0
        assert _get(samples, "liveplex_engine_reattaches_total", result="parked") == 0


async def test_a_caller_who_hangs_up_is_never_parked() -> None:
    async with pods.in_process("--reattach-grace-s", "10") as pod:
        ws, _ = await clients.started(pod.ws_url, _relay("sess_bye"))
        await ws.close(hop.ENDS_SESSION_CLOSE)
        async with asyncio.timeout(5):
            while (await _stats_sessions(pod)) != 0:
                await asyncio.sleep(0.05)
        samples = await _samples(pod)
        assert _get(samples, "liveplex_engine_sessions_parked") == 0
        assert sum(v for (name, _), v in samples.items() if name == "liveplex_engine_parked_ended_total") == 0


async def _stats_sessions(pod: pods.Running) -> int:
    async with httpx.AsyncClient() as http:
        return (await http.get(pod.admin_root + "/live/stats", timeout=5)).json()["sessions"]


def test_parking_counts_a_window_as_window_passed_and_other_ends_by_their_reason() -> None:
    parking = stats.Parking()
    parking.ended("remote_hangup")  # `Parked._window_passed` ends it as a dropped socket's session
    parking.ended("expired")
    parking.reattached(1_000_000_000, 3_500_000_000)
    parking.reattached(None, 3_500_000_000)
    snap = parking.snapshot(parked=2)
    assert snap.parked == 2 and snap.parked_ended == {"window_passed": 1, "expired": 1}
    assert snap.reattaches == {"parked": 1, "taken_over": 1}
    assert snap.gap.total == 2.5 and sum(snap.gap.counts) == 1
    parking.ended("expired")
    assert snap.parked_ended["expired"] == 1  # a snapshot is a copy
