"""The Deployment and ReplicaSet controllers as pure plans: objects in, the writes to make out.

Development emulator, not for production. Pure: callers pass the objects and the time. A
Deployment owns one ReplicaSet per pod template (`<deploy>-<pod-template-hash>`), each of which owns
its pods (`generateName: <replicaset>-`, so `<deploy>-<hash>-<5 chars>`). RollingUpdate follows
kube-controller-manager's arithmetic (scale the new ReplicaSet up within `maxSurge`, then the old
ones down while at least `replicas - maxUnavailable` pods stay available); Recreate scales the old
ReplicaSets to zero and waits for their pods to be gone first. A template seen before (`kubectl
rollout undo`) brings its old ReplicaSet back, under the next revision. "Available" means Ready:
`minReadySeconds` is not honoured, and neither are `paused`, proportional scaling of several old
ReplicaSets, or `progressDeadlineSeconds`.

Scale-down picks pods the way a ReplicaSet ranks them: pending before running, not ready before
ready, lower `controller.kubernetes.io/pod-deletion-cost` first, then the most recently ready, the
most restarted, the newest.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_HASH_CHARS = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class Create:
    """Create `body` (a ReplicaSet or a Pod) in `namespace`."""

    kind: str
    namespace: str
    body: dict


@dataclass(frozen=True, slots=True)
class Scale:
    namespace: str
    name: str
    replicas: int


@dataclass(frozen=True, slots=True)
class DeletePod:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class SetStatus:
    """Write `status` through the status subresource of `kind` `name` (only when it differs)."""

    kind: str
    namespace: str
    name: str
    status: dict


@dataclass(frozen=True, slots=True)
class Annotate:
    """Set `annotations` on `kind` `name` (a merge patch of its metadata)."""

    kind: str
    namespace: str
    name: str
    annotations: dict


Action = Create | Scale | DeletePod | SetStatus | Annotate


def _zero_free(value: object) -> object:
    """`value` without nulls and empty maps or lists: Go's zero values, which a client may or may not
    send (`kubectl rollout undo` sends `creationTimestamp: null` and `resources: {}`)."""
    if isinstance(value, dict):
        kept = {k: _zero_free(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_zero_free(v) for v in value]
    return value


def template_hash(template: dict) -> str:
    """A stable 10-character hash of a pod template, in the alphabet of generated names; templates
    that differ only in zero values hash alike, as upstream's hash of the Go struct does."""
    text = json.dumps(_zero_free(template), sort_keys=True)
    digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = ""
    for _ in range(10):
        digest, n = divmod(digest, len(_HASH_CHARS))
        out += _HASH_CHARS[n]
    return out


def _meta(obj: dict) -> dict:
    return obj["metadata"]


def owned_by(owner: dict, obj: dict) -> bool:
    uid = _meta(owner)["uid"]
    return any(r.get("uid") == uid and r.get("controller") for r in _meta(obj).get("ownerReferences") or [])


def owner_ref(owner: dict, kind: str) -> dict:
    return {"apiVersion": owner.get("apiVersion", "apps/v1"), "kind": kind, "name": _meta(owner)["name"],
            "uid": _meta(owner)["uid"], "controller": True, "blockOwnerDeletion": True}


def active(pod: dict) -> bool:
    """Counted by its ReplicaSet: not terminating, not finished."""
    return not _meta(pod).get("deletionTimestamp") and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")


def _condition(pod: dict, kind: str) -> dict | None:
    return next((c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def ready(pod: dict) -> bool:
    cond = _condition(pod, "Ready")
    return cond is not None and cond.get("status") == "True"


def _cost(pod: dict) -> int:
    try:
        return int((_meta(pod).get("annotations") or {}).get(DELETION_COST, "0"))
    except ValueError:
        return 0


def _desc(stamp: str) -> tuple[int, ...]:
    """Sorts RFC 3339 stamps newest first inside an ascending sort."""
    return tuple(-ord(c) for c in stamp)


def deletion_order(pods: Sequence[dict]) -> list[dict]:
    """`pods` in the order a ReplicaSet scale-down removes them (see the module docstring)."""
    phase_rank = {"Pending": 0, "Unknown": 1, "Running": 2}

    def key(pod: dict) -> tuple:
        status = pod.get("status", {})
        ready_since = (_condition(pod, "Ready") or {}).get("lastTransitionTime", "") if ready(pod) else ""
        restarts = sum(s.get("restartCount", 0) for s in status.get("containerStatuses") or [])
        return (phase_rank.get(status.get("phase", "Pending"), 0), ready(pod), _cost(pod), _desc(ready_since),
                -restarts, _desc(_meta(pod).get("creationTimestamp", "")))

    return sorted(pods, key=key)


def plan_replicaset(rs: dict, pods: Sequence[dict]) -> list[Action]:
    """Create or delete pods until `spec.replicas` are active; then report status."""
    meta, spec = _meta(rs), rs.get("spec", {})
    live = [p for p in pods if active(p)]
    want = int(spec.get("replicas", 1))
    actions: list[Action] = []
    if len(live) < want:
        template = copy.deepcopy(spec.get("template") or {})
        pod_meta = template.get("metadata") or {}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {**pod_meta, "generateName": f"{meta['name']}-", "ownerReferences": [
                    owner_ref(rs, "ReplicaSet")]},
                "spec": template.get("spec") or {}}
        actions += [Create("Pod", meta["namespace"], copy.deepcopy(body)) for _ in range(want - len(live))]
    elif len(live) > want:
        actions += [DeletePod(meta["namespace"], _meta(p)["name"]) for p in deletion_order(live)[:len(live) - want]]
    n_ready = sum(1 for p in live if ready(p))
    status = {"replicas": len(live), "fullyLabeledReplicas": len(live), "readyReplicas": n_ready,
              "availableReplicas": n_ready, "observedGeneration": meta.get("generation", 1)}
    actions.append(SetStatus("ReplicaSet", meta["namespace"], meta["name"], status))
    return actions


def _resolve(value: int | str | None, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = total * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value or 0)


def _revision(rs: dict) -> int:
    try:
        return int((_meta(rs).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _new_replicaset(deploy: dict, pod_hash: str, revision: int, replicas: int) -> dict:
    meta, spec = _meta(deploy), deploy["spec"]
    template = copy.deepcopy(spec["template"])
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pod_hash
    selector = copy.deepcopy(spec["selector"])
    selector.setdefault("matchLabels", {})[HASH_LABEL] = pod_hash
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{pod_hash}", "namespace": meta["namespace"],
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {REVISION: str(revision), "deployment.kubernetes.io/desired-replicas":
                                         str(spec.get("replicas", 1))},
                         "ownerReferences": [owner_ref(deploy, "Deployment")]},
            "spec": {"replicas": replicas, "selector": selector, "template": template}}


def _rollout(deploy: dict, new: dict, old: list[dict], pods: dict[str, list[dict]]) -> list[Action]:
    """One step of the rollout or the scaling: at most one scale action."""
    spec = deploy["spec"]
    want = int(spec.get("replicas", 1))
    ns = _meta(deploy)["namespace"]
    new_replicas = int(new["spec"].get("replicas", 0))
    old_live = [rs for rs in old if int(rs["spec"].get("replicas", 0)) > 0]
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        if old_live:
            return [Scale(ns, _meta(rs)["name"], 0) for rs in old_live]
        if any(pods.get(_meta(rs)["uid"]) for rs in old):
            return []
        return [Scale(ns, _meta(new)["name"], want)] if new_replicas != want else []
    if not old_live:
        return [Scale(ns, _meta(new)["name"], want)] if new_replicas != want else []
    rolling = strategy.get("rollingUpdate") or {}
    surge = _resolve(rolling.get("maxSurge", "25%"), want, round_up=True)
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), want, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    total = new_replicas + sum(int(rs["spec"].get("replicas", 0)) for rs in old_live)
    if new_replicas < want and total < want + surge:
        return [Scale(ns, _meta(new)["name"], min(want, new_replicas + want + surge - total))]
    if new_replicas > want:
        return [Scale(ns, _meta(new)["name"], want)]
    min_available = want - unavailable
    budget = total - min_available - (new_replicas - _ready_count(pods, new))
    if budget <= 0:
        return []
    oldest = sorted(old_live, key=lambda r: _meta(r).get("creationTimestamp", ""))
    targets = {_meta(rs)["name"]: int(rs["spec"]["replicas"]) for rs in oldest}
    for rs in oldest:
        step = max(0, min(targets[_meta(rs)["name"]] - _ready_count(pods, rs), budget))
        targets[_meta(rs)["name"]] -= step
        budget -= step
    spare = _ready_count(pods, new) + sum(_ready_count(pods, rs) for rs in oldest) - min_available
    for rs in oldest:
        step = max(0, min(targets[_meta(rs)["name"]], spare))
        targets[_meta(rs)["name"]] -= step
        spare -= step
    return [Scale(ns, _meta(rs)["name"], targets[_meta(rs)["name"]]) for rs in oldest
            if targets[_meta(rs)["name"]] != int(rs["spec"]["replicas"])]


def _ready_count(pods: dict[str, list[dict]], rs: dict) -> int:
    return sum(1 for p in pods.get(_meta(rs)["uid"], []) if active(p) and ready(p))


def _conditions(old: list[dict], available_ok: bool, complete: bool, new_name: str, now: str) -> list[dict]:
    wanted = [
        ("Available", "True" if available_ok else "False",
         "MinimumReplicasAvailable" if available_ok else "MinimumReplicasUnavailable",
         "Deployment has minimum availability." if available_ok else "Deployment does not have minimum availability."),
        ("Progressing", "True", "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
         f'ReplicaSet "{new_name}" has successfully progressed.' if complete
         else f'ReplicaSet "{new_name}" is progressing.'),
    ]
    out = []
    for kind, status, reason, message in wanted:
        before = next((c for c in old if c.get("type") == kind), None)
        if before is None:
            updated = transitioned = now
        else:
            same = (before.get("status"), before.get("reason"), before.get("message")) == (status, reason, message)
            updated = before["lastUpdateTime"] if same else now
            transitioned = now if before.get("status") != status else before.get("lastTransitionTime", now)
        out.append({"type": kind, "status": status, "reason": reason, "message": message,
                    "lastUpdateTime": updated, "lastTransitionTime": transitioned})
    return out


def _revisions(deploy: dict, new: dict, old: list[dict]) -> list[Action]:
    """A ReplicaSet that becomes current again (`kubectl rollout undo`) takes the next revision, and
    the Deployment carries its ReplicaSet's revision, as kube-controller-manager keeps them."""
    out: list[Action] = []
    revision = _revision(new)
    if any(_revision(rs) > revision for rs in old):
        revision = max(_revision(rs) for rs in old) + 1
        out.append(Annotate("ReplicaSet", _meta(new)["namespace"], _meta(new)["name"], {REVISION: str(revision)}))
    if (_meta(deploy).get("annotations") or {}).get(REVISION) != str(revision):
        out.append(Annotate("Deployment", _meta(deploy)["namespace"], _meta(deploy)["name"], {REVISION: str(revision)}))
    return out


def plan_deployment(deploy: dict, replicasets: Sequence[dict], pods: dict[str, list[dict]], now: str) -> list[Action]:
    """The next step for `deploy`, given the ReplicaSets it owns and their pods (by ReplicaSet uid)."""
    meta, spec = _meta(deploy), deploy["spec"]
    if meta.get("deletionTimestamp"):
        return []
    pod_hash = template_hash(spec["template"])
    new = next((rs for rs in replicasets
                if (rs["spec"].get("template", {}).get("metadata", {}).get("labels") or {}).get(HASH_LABEL)
                == pod_hash), None)
    old = [rs for rs in replicasets if rs is not new]
    want = int(spec.get("replicas", 1))
    if new is None:
        revision = max((_revision(rs) for rs in replicasets), default=0) + 1
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        start = 0 if old and (recreate or any(int(rs["spec"].get("replicas", 0)) for rs in old)) else want
        return [Create("ReplicaSet", meta["namespace"], _new_replicaset(deploy, pod_hash, revision, start))]
    actions = _revisions(deploy, new, old) + _rollout(deploy, new, old, pods)
    live = {uid: [p for p in group if active(p)] for uid, group in pods.items()}
    owned = [_meta(rs)["uid"] for rs in replicasets]
    total = sum(len(live.get(uid, [])) for uid in owned)
    n_ready = sum(1 for uid in owned for p in live.get(uid, []) if ready(p))
    updated = len(live.get(_meta(new)["uid"], []))
    new_ready = sum(1 for p in live.get(_meta(new)["uid"], []) if ready(p))
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    unavailable = _resolve(rolling.get("maxUnavailable", "25%"), want, round_up=False)
    complete = updated == want and new_ready == want and total == want and not any(pods.get(_meta(rs)["uid"])
                                                                                    for rs in old)
    status = {"observedGeneration": meta.get("generation", 1), "replicas": total, "updatedReplicas": updated,
              "readyReplicas": n_ready, "availableReplicas": n_ready,
              "unavailableReplicas": max(0, want - n_ready),
              "conditions": _conditions(deploy.get("status", {}).get("conditions") or [],
                                        n_ready >= want - unavailable, complete, _meta(new)["name"], now)}
    for key in ("readyReplicas", "availableReplicas", "unavailableReplicas", "updatedReplicas", "replicas"):
        if status[key] == 0:
            del status[key]
    actions.append(SetStatus("Deployment", meta["namespace"], meta["name"], status))
    return actions
