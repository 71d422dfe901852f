"""The test-side HPA algorithm itself: the formula, the tolerance, stabilisation and the policies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.operator import render, spec
from tests.operator import hpa, objects


def _autoscaler(window_s: int = 10, period_s: int = 5) -> hpa.Autoscaler:
    le = spec.parse(objects.liveengine(objects.sim_spec(capacity={"maxSessions": 4}, autoscaling={
        "enabled": True, "provider": "hpa", "maxReplicas": 10, "targetOccupancyPercent": 50,
        "scaleDownStabilizationSeconds": window_s, "scaleDownPeriodSeconds": period_s})))
    return hpa.Autoscaler.of(render.render_hpa(le))


def test_the_rendered_target_and_behaviour_are_read() -> None:
    a = _autoscaler()
    assert (a.min_replicas, a.max_replicas, a.target) == (1, 10, 2.0)
    assert a.down == hpa.Rules(10, (("Pods", 1, 5),), "Max") and a.up.window_s == 0


def test_the_recommendation_is_ceil_of_current_times_metric_over_target() -> None:
    a = _autoscaler()
    assert a.recommend(2, [3.0, 4.0]) == 4          # ratio 1.75 over 2 pods
    assert a.recommend(2, [2.1, 2.1]) == 2          # within the 10 % tolerance
    assert a.recommend(3, [0.0, 0.0, 0.0]) == 0


def test_scale_down_waits_for_the_window_then_goes_one_pod_per_period() -> None:
    a = _autoscaler(window_s=10, period_s=5)
    current, seen = 6, []
    for t in range(0, 40):
        new = a.desired(float(t), current, [0.0] * current if t else [2.0] * current)
        if new != current:
            seen.append((t, new))
        current = new
    assert seen == [(10, 5), (15, 4), (20, 3), (25, 2), (30, 1)]


@settings(max_examples=60, deadline=None)
@given(loads=st.lists(st.floats(0, 8), min_size=1, max_size=30))
def test_replicas_stay_in_bounds_and_never_drop_by_more_than_one_per_period(loads: list[float]) -> None:
    a = _autoscaler(window_s=0, period_s=3)
    current, history = 1, []
    for t, load in enumerate(loads):
        new = a.desired(float(t), current, [load] * current)
        assert 1 <= new <= 10
        history.append((t, new - current))
        current = new
    for t, _ in history:
        assert -sum(d for u, d in history if t - 3 < u <= t and d < 0) <= 1
