"""The Deployment and ReplicaSet plans: pods per ReplicaSet, the scale-down ranking, rollouts within their bounds."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from liveplex.emulator.controllers import deployments as d

NOW = "2025-01-01T00:00:00Z"
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}


def deployment(replicas: int, strategy: dict | None = None, template: dict = TEMPLATE) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": template,
                     "strategy": strategy or {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}


def pod(name: str, ready: bool = True, cost: int | None = None, created: str = "2025-01-01T00:00:00Z",
        phase: str = "Running") -> dict:
    meta: dict = {"name": name, "namespace": "ns", "uid": f"{name}-uid", "creationTimestamp": created}
    if cost is not None:
        meta["annotations"] = {d.DELETION_COST: str(cost)}
    return {"metadata": meta, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": created}]}}


def replicaset(deploy: dict, replicas: int, uid: str, template: dict = TEMPLATE) -> dict:
    body = d._new_replicaset(deploy, d.template_hash(template), 1, replicas)
    body["metadata"].update(uid=uid, creationTimestamp=NOW if uid == "new" else "2024-01-01T00:00:00Z")
    return body


def test_a_new_deployment_creates_its_replicaset_named_by_the_template_hash() -> None:
    [create] = d.plan_deployment(deployment(2), [], {}, NOW)
    assert isinstance(create, d.Create) and create.kind == "ReplicaSet"
    assert create.body["metadata"]["name"] == f"web-{d.template_hash(TEMPLATE)}"
    assert create.body["spec"]["replicas"] == 2
    assert create.body["spec"]["selector"]["matchLabels"][d.HASH_LABEL] == d.template_hash(TEMPLATE)


def test_a_replicaset_creates_the_missing_pods_with_generated_names() -> None:
    rs = replicaset(deployment(3), 3, "rs")
    actions = d.plan_replicaset(rs, [pod("a")])
    creates = [a for a in actions if isinstance(a, d.Create)]
    assert len(creates) == 2
    assert creates[0].body["metadata"]["generateName"] == f"{rs['metadata']['name']}-"
    assert creates[0].body["metadata"]["ownerReferences"][0]["uid"] == "rs"


def test_scale_down_removes_not_ready_first_then_the_lowest_deletion_cost_then_the_newest() -> None:
    pods = [pod("busy", cost=9), pod("idle", cost=1), pod("starting", ready=False, cost=50),
            pod("old", cost=1, created="2024-01-01T00:00:00Z"), pod("pending", phase="Pending", ready=False)]
    assert [p["metadata"]["name"] for p in d.deletion_order(pods)] == ["pending", "starting", "idle", "old", "busy"]
    rs = replicaset(deployment(2), 2, "rs")
    deleted = [a.name for a in d.plan_replicaset(rs, pods[:4]) if isinstance(a, d.DeletePod)]
    assert deleted == ["starting", "idle"]


@given(st.lists(st.tuples(st.booleans(), st.integers(-5, 5)), min_size=1, max_size=6))
def test_deletion_order_is_a_permutation_that_puts_not_ready_pods_first(specs: list[tuple[bool, int]]) -> None:
    pods = [pod(f"p{n}", ready, cost) for n, (ready, cost) in enumerate(specs)]
    order = d.deletion_order(random.Random(0).sample(pods, len(pods)))
    assert sorted(p["metadata"]["name"] for p in order) == sorted(p["metadata"]["name"] for p in pods)
    readiness = [d.ready(p) for p in order]
    assert readiness == sorted(readiness)


def _simulate(strategy: dict, steps: int = 20) -> list[tuple[int, int, int]]:
    """Roll web from an old template to a new one, making every created pod ready at once.

    Returns (old pods, new pods, ready pods) after each step.
    """
    new_template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "y"}]}}
    deploy = deployment(3, strategy, new_template)
    old = replicaset(deploy, 3, "old")
    pods = {"old": [pod(f"o{n}") for n in range(3)], "new": []}
    sets = [old]
    trace = []
    for _ in range(steps):
        for action in d.plan_deployment(deploy, sets, pods, NOW):
            if isinstance(action, d.Create):
                sets.append(dict(action.body, metadata=dict(action.body["metadata"], uid="new",
                                                            creationTimestamp=NOW)))
            elif isinstance(action, d.Scale):
                next(s for s in sets if s["metadata"]["name"] == action.name)["spec"]["replicas"] = action.replicas
        for rs in sets:
            uid, want = rs["metadata"]["uid"], rs["spec"]["replicas"]
            pods[uid] = pods[uid][:want] + [pod(f"{uid}{n}") for n in range(len(pods[uid]), want)]
        trace.append((len(pods["old"]), len(pods["new"]), sum(map(len, pods.values()))))
    return trace


def test_rolling_update_never_drops_below_replicas_nor_surges_past_max_surge() -> None:
    trace = _simulate({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    assert trace[-1] == (0, 3, 3)
    assert all(3 <= total <= 4 for _, _, total in trace)


def test_recreate_removes_every_old_pod_before_the_first_new_one() -> None:
    trace = _simulate({"type": "Recreate"})
    assert trace[-1] == (0, 3, 3)
    assert all(old == 0 or new == 0 for old, new, _ in trace)


def test_status_counts_ready_and_updated_pods_and_observes_the_generation() -> None:
    deploy = deployment(2)
    rs = replicaset(deploy, 2, "new")
    actions = d.plan_deployment(deploy, [rs], {"new": [pod("a"), pod("b", ready=False)]}, NOW)
    status = next(a for a in actions if isinstance(a, d.SetStatus)).status
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"], status["observedGeneration"]) == (
        2, 2, 1, 1)
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Available": "False", "Progressing": "True"}
