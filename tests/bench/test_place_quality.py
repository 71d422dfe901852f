"""`bench place --quality` on a small pool: one pool always picks the global best (the baseline is
exact), sub-pools are graded against it, and the pools leave nothing behind; no speed is asserted."""

from __future__ import annotations

import pytest
import redis

from liveplex.bench import place_quality


def test_sub_pools_are_graded_against_the_single_pool_choice(redis_url: str) -> None:
    plan = place_quality.Plan(redis_url, False, pods=24, capacity=3, counts=(1, 4), steps=150, occupancy=0.6)
    report = place_quality.measure(plan)
    one, four = report["runs"]
    assert one["subpools"] == 1 and one["worse_than_best"] == 0 and one["mean_shortfall_slots"] == 0
    assert one["subpool_occupancy_spread"] == 0 and one["pod_spread_slots"] <= 1, "spread keeps pods level"
    assert four["subpools"] == 4 and 0 <= four["worse_than_best"] <= 1
    assert four["mean_shortfall_slots"] >= four["worse_than_best"], "a worse pick is short by a slot at least"
    assert one["place_ms"]["count"] == four["place_ms"]["count"] == 150
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.keys("le:{bench/quality-*:pod:*") == raw.keys("le:{bench/quality-*:resv:*") == []


@pytest.mark.parametrize(("change", "param"), [({"pods": 0}, "--pods"), ({"occupancy": 1.0}, "--occupancy"),
                                               ({"counts": (30,)}, "--subpools"), ({"counts": (0,)}, "subpools")])
def test_bad_quality_plans_name_their_parameter(change: dict[str, object], param: str) -> None:
    args: dict[str, object] = {"url": "redis://x", "cluster": False, "pods": 24, "capacity": 3, "counts": (1,),
                               "steps": 10, "occupancy": 0.5, **change}
    with pytest.raises(ValueError, match=param):
        place_quality.Plan(**args)  # type: ignore[arg-type]
