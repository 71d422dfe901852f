"""The tick groups a pod runs, observed (issue 44, docs/observability.md): `/live/stats`'
`tick_groups`, `tick_groups_reason` and `regroups`, and `liveplex_engine_tick_groups` and
`liveplex_engine_regroups_total`, from a real sim pod in this process running PersonaPlex's rule on
modeled costs, and a caller on a raw socket."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support import clients, exposition, pods

ONE_FITS = ("--tick-groups", "0", "--tick-base-us", "40000", "--tick-per-session-us", "200")
"""A step of 40 ms and more: two turns of even one row end past the 80 ms period."""


async def _observed(pod: pods.Running) -> tuple[dict[str, object], dict[str, float]]:
    """`/live/stats`' groups fields, and the groups' series of `/metrics`."""
    async with httpx.AsyncClient() as http:
        stats = (await http.get(pod.admin_root + "/live/stats", timeout=5)).json()
        text = (await http.get(pod.admin_root + "/metrics", timeout=5)).text
    assert exposition.misnamed(text) == []
    series = {s.name: s.value for family in text_string_to_metric_families(text)
              if family.name in ("liveplex_engine_tick_groups", "liveplex_engine_regroups") for s in family.samples}
    return {k: stats[k] for k in ("tick_groups", "tick_groups_reason", "regroups")}, series


async def test_a_pod_whose_steps_leave_room_for_one_group_says_so_once_a_caller_comes() -> None:
    async with pods.in_process(*ONE_FITS) as pod:
        stats, series = await _observed(pod)
        assert (stats["tick_groups"], stats["regroups"]) == (4, 0)  # the most, until a period with a caller
        assert series == {"liveplex_engine_tick_groups": 4, "liveplex_engine_regroups_total": 0}
        ws, _ = await clients.started(pod.ws_url)
        async with asyncio.timeout(5):
            while (await _observed(pod))[0]["tick_groups"] != 1:
                await asyncio.sleep(0.05)
        stats, series = await _observed(pod)
        assert stats["regroups"] == 1 and str(stats["tick_groups_reason"]).startswith("1 x 40.2 ms (1 rows)")
        assert "not 2 x 40.2 ms" in str(stats["tick_groups_reason"])
        assert series == {"liveplex_engine_tick_groups": 1, "liveplex_engine_regroups_total": 1}
        await ws.close()


async def test_a_fixed_pod_reports_its_groups_and_no_reason() -> None:
    async with pods.in_process("--tick-groups", "2") as pod:
        stats, series = await _observed(pod)
        assert stats == {"tick_groups": 2, "tick_groups_reason": "", "regroups": 0}
        assert series == {"liveplex_engine_tick_groups": 2, "liveplex_engine_regroups_total": 0}
