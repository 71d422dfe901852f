"""The status roll-up: every condition reason reachable, phases, figures, and transitions only on flips."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.operator import LoadFigures, compute_status
from liveplex.operator.status import Reason, Transition, refusal, transitions
from tests.operator import objects
from tests.operator.objects import deployment, pod

NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
LOAD = LoadFigures(active=10, reserved=2, capacity=64, p99_lateness_ms=3, late_permille=1)
READY2 = deployment(replicas=2, ready=2)
PODS2 = [pod("pp-1", ready=True, started=True), pod("pp-2", ready=True, started=True)]
OVER = LoadFigures(active=1, capacity=64, p99_lateness_ms=31)


def _le(replicas: int = 2, previous: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return objects.liveengine(objects.sim_spec(replicas=replicas, **spec), status=previous)


def _reasons(st_: dict[str, Any]) -> tuple[str, ...]:
    return tuple(c["reason"] for c in st_["conditions"])


CASES: dict[str, tuple[dict[str, Any], Any, list, LoadFigures | None, tuple[str, ...], tuple[str, ...], str]] = {
    "serving": (_le(), READY2, PODS2, LOAD, (),
                ("AllReplicasReady", "RolloutComplete", "TickLatenessWithinBudget", "HeadroomAvailable"), "Ready"),
    "no deployment yet": (_le(), None, [], None, (),
                          ("PodsNotReady", "RollingOut", "TickLatenessWithinBudget", "HeadroomAvailable"),
                          "Progressing"),
    "no gpu node": (_le(), deployment(replicas=2, ready=1), [
        pod("pp-1", ready=True, started=True), pod("pp-2", running=False, unschedulable="0/3 nodes: gpu")],
        LOAD, (), ("InsufficientCapacity", "RollingOut", "TickLatenessWithinBudget", "HeadroomAvailable"),
        "Progressing"),
    "quota": (_le(replicas=1), deployment(replicas=1, total=0, conditions=[
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "exceeded quota"}]), [],
        LOAD, (), ("InsufficientCapacity", "Scaling", "TickLatenessWithinBudget", "HeadroomAvailable"),
        "Progressing"),
    "image pull": (_le(replicas=1), deployment(replicas=1), [pod("pp-1", running=False, waiting="ImagePullBackOff")],
                   LOAD, (), ("ImagePullFailing", "RollingOut", "TickLatenessWithinBudget", "HeadroomAvailable"),
                   "Progressing"),
    "loading": (_le(replicas=1), deployment(replicas=1, conditions=[
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]), [pod("pp-1")], LOAD, (),
        ("ModelLoading", "Scaling", "TickLatenessWithinBudget", "HeadroomAvailable"), "Progressing"),
    "started, not ready": (_le(replicas=1), deployment(replicas=1, available=1), [pod("pp-1", started=True)],
                           LOAD, (),
                           ("PodsNotReady", "RolloutComplete", "TickLatenessWithinBudget", "HeadroomAvailable"),
                           "Pending"),
    "invalid spec": (objects.liveengine({"engine": {"kind": "personaplex"}}), READY2, PODS2, LOAD, (),
                     ("InvalidSpec", "RolloutComplete", "TickLatenessWithinBudget", "AllSlotsInUse"), "Failed"),
    "route conflict": (_le(), READY2, PODS2, LOAD, ("gpt-live-1",),
                       ("RouteConflict", "RolloutComplete", "TickLatenessWithinBudget", "HeadroomAvailable"),
                       "Failed"),
    "rolling out": (_le(), deployment(replicas=2, ready=2, total=3, updated=1), PODS2, LOAD, (),
                    ("AllReplicasReady", "RollingOut", "TickLatenessWithinBudget", "HeadroomAvailable"),
                    "Progressing"),
    "new generation unobserved": (_le(), deployment(replicas=2, ready=2, generation=3, observed=2), PODS2, LOAD,
                                  (), ("AllReplicasReady", "RollingOut", "TickLatenessWithinBudget",
                                       "HeadroomAvailable"), "Progressing"),
    "scaled up by kubectl scale": (_le(replicas=3), READY2, PODS2, LOAD, (),
                                   ("PodsNotReady", "Scaling", "TickLatenessWithinBudget", "HeadroomAvailable"),
                                   "Progressing"),
    "full": (_le(), READY2, PODS2, LoadFigures(active=60, reserved=4, capacity=64), (),
             ("AllReplicasReady", "RolloutComplete", "TickLatenessWithinBudget", "AllSlotsInUse"), "Ready"),
    "late twice": (_le(previous={"tick": {"p99LatenessMillis": 25, "lateTickPermille": 9}}), READY2, PODS2, OVER,
                   (), ("AllReplicasReady", "RolloutComplete", "TickLatenessOverBudget", "HeadroomAvailable"),
                   "Degraded"),
    "late once": (_le(), READY2, PODS2, OVER, (),
                  ("AllReplicasReady", "RolloutComplete", "TickLatenessWithinBudget", "HeadroomAvailable"), "Ready"),
    "scaled to zero": (_le(replicas=0), deployment(replicas=0), [], LoadFigures(), (),
                       ("PodsNotReady", "RolloutComplete", "TickLatenessWithinBudget", "HeadroomAvailable"),
                       "Pending"),
}
CASES["invalid spec"][0]["status"] = {"conditions": [
    {"type": "CapacityExhausted", "status": "True", "reason": "AllSlotsInUse", "message": "",
     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


@pytest.mark.parametrize("case", CASES)
def test_conditions_and_phase(case: str) -> None:
    le, dep, pods, load, conflicts, reasons, phase = CASES[case]
    out = compute_status(le, dep, pods, load if case != "invalid spec" else None, NOW, conflicts=conflicts)
    assert (_reasons(out), out["phase"]) == (reasons, phase)


AUTOSCALING = {"enabled": True, "provider": "hpa", "minReplicas": 1, "maxReplicas": 4}
AUTOSCALING_CASES: dict[str, tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]] = {
    "enabled": (_le(autoscaling=AUTOSCALING), (), ("AutoscalerRendered",)),
    "another targets it": (_le(autoscaling=AUTOSCALING), ("HorizontalPodAutoscaler/manual",), ("AutoscalerConflict",)),
    "disabled": (_le(autoscaling={**AUTOSCALING, "enabled": False}), ("HorizontalPodAutoscaler/manual",), ()),
    "absent": (_le(), (), ()),
}


@pytest.mark.parametrize("case", AUTOSCALING_CASES)
def test_the_autoscaling_condition_is_there_only_while_enabled(case: str) -> None:
    le, foreign, reasons = AUTOSCALING_CASES[case]
    out = compute_status(le, READY2, PODS2, LOAD, NOW, foreign_autoscalers=foreign)
    assert _reasons(out)[4:] == reasons and out["phase"] == "Ready"
    if foreign and reasons:
        assert foreign[0] in out["conditions"][4]["message"]


def test_an_invalid_spec_keeps_the_last_autoscaling_condition() -> None:
    first = compute_status(_le(autoscaling=AUTOSCALING), READY2, PODS2, LOAD, NOW)
    broken = objects.liveengine({"engine": {"kind": "personaplex"}}, status=first)
    assert compute_status(broken, READY2, PODS2, LOAD, NOW)["conditions"][4] == first["conditions"][4]


def test_every_reason_is_reachable() -> None:
    seen = {r for le, dep, pods, load, conflicts, reasons, _ in CASES.values() for r in reasons}
    seen |= {r for _, _, reasons in AUTOSCALING_CASES.values() for r in reasons}
    seen |= set(_reasons(_refused()))
    assert seen == {str(r) for r in Reason}


REFUSED = 'the API server refused a child: 422: Deployment.apps "pp" is invalid: spec.template.metadata.labels: ...'


def _refused() -> dict[str, Any]:
    return compute_status(_le(), None, [], None, NOW, refused=REFUSED)


def test_a_refused_child_is_reported_with_the_servers_message_for_its_generation_only() -> None:
    out = _refused()
    assert _reasons(out)[:3] == ("ChildRefused", "RolloutComplete", "TickLatenessWithinBudget")
    assert out["phase"] == "Failed"
    assert out["conditions"][0]["message"] == REFUSED and out["conditions"][0]["status"] == "False"
    assert refusal(_le(previous=out)) == REFUSED
    newer = _le(previous=out)
    newer["metadata"]["generation"] = 2
    assert refusal(newer) is None and refusal(_le()) is None


def test_transitions_are_the_conditions_whose_status_or_reason_changed() -> None:
    first = compute_status(_le(), None, [], None, NOW)
    assert transitions({}, first) == [Transition("Ready", "False", "PodsNotReady", "0/2 replicas ready"),
                                      Transition("Progressing", "True", "RollingOut", "creating the Deployment")]
    one = compute_status(_le(previous=first), deployment(replicas=2, ready=1), PODS2[:1], None, NOW)
    assert transitions(first, one) == [], "1/2 replicas ready: a new message under the same reasons"
    serving = compute_status(_le(previous=one), READY2, PODS2, LOAD, NOW)
    assert [(t.condition, t.reason, t.note) for t in transitions(one, serving)] == [
        ("Ready", "AllReplicasReady", "Ready=True: 2/2 replicas ready"),
        ("Progressing", "RolloutComplete", "Progressing=False: 2 pods available")]
    assert transitions(serving, compute_status(_le(previous=serving), READY2, PODS2, LOAD, NOW)) == []
    full = compute_status(_le(previous=serving), READY2, PODS2, LoadFigures(active=64, capacity=64), NOW)
    [exhausted] = transitions(serving, full)
    assert (exhausted.reason, exhausted.event_type) == ("AllSlotsInUse", "Warning")


def test_figures_are_integers_and_the_selector_a_string() -> None:
    out = compute_status(_le(), READY2, PODS2, LoadFigures(active=1, reserved=1, capacity=3, p99_lateness_ms=4), NOW)
    assert out["sessions"] == {"active": 1, "reserved": 1, "capacity": 3} and out["occupancyPercent"] == 67
    assert out["tick"] == {"p99LatenessMillis": 4, "lateTickPermille": 0}
    assert out["selector"] == "app.kubernetes.io/name=liveengine,app.kubernetes.io/instance=pp"
    assert (out["replicas"], out["readyReplicas"], out["updatedReplicas"], out["observedGeneration"]) == (2, 2, 2, 1)
    assert {c["observedGeneration"] for c in out["conditions"]} == {1}


def test_without_load_the_figures_and_their_conditions_are_kept() -> None:
    first = compute_status(_le(), READY2, PODS2, LoadFigures(active=64, capacity=64, p99_lateness_ms=5), NOW)
    later = compute_status(_le(previous=first), READY2, PODS2, None, NOW + timedelta(seconds=10))
    assert later == first


def test_unchanged_inputs_give_an_unchanged_status() -> None:
    first = compute_status(_le(), READY2, PODS2, LOAD, NOW)
    assert compute_status(_le(previous=first), READY2, PODS2, LOAD, NOW + timedelta(hours=1)) == first


_steps = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 70)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(_steps)
def test_last_transition_time_moves_only_when_status_flips(steps: list[tuple[int, int, int]]) -> None:
    previous: dict[str, Any] | None = None
    for i, (ready, p99, active) in enumerate(steps):
        now = NOW + timedelta(seconds=10 * i)
        pods = [pod(f"pp-{k}", ready=k < ready, started=True) for k in range(2)]
        load = LoadFigures(active=active, capacity=64, p99_lateness_ms=p99)
        out = compute_status(_le(previous=previous), deployment(replicas=2, ready=ready), pods, load, now)
        before = {c["type"]: c for c in (previous or {}).get("conditions", ())}
        for c in out["conditions"]:
            old = before.get(c["type"])
            if old is not None and old["status"] == c["status"]:
                assert c["lastTransitionTime"] == old["lastTransitionTime"]
            else:
                assert c["lastTransitionTime"] == now.strftime("%Y-%m-%dT%H:%M:%SZ")
        previous = out
