"""The LiveEngine status roll-up: counts, sessions, tick health, phase and typed conditions.

`compute_status` is pure (platform §4 rule 2): the Deployment, its pods and the pool's Redis
aggregates come in as values, the time as an argument, the previous status from the object.
It is a fixed point: unchanged inputs give an unchanged status, so the timer patches only when
something really changed, and a condition's `lastTransitionTime` moves only when its `status`
flips.

`Degraded` needs p99 tick lateness over budget on two consecutive roll-ups. The previous
roll-up's figure is `status.tick.p99LatenessMillis` itself, so no counter is stored.
Without load figures (Redis unreadable) the session and tick figures and the two conditions
they drive keep their previous values. An invalid spec sets `Ready=False, InvalidSpec` and
freezes `Progressing` and `Degraded` at their previous values; so does a child the API server
refused (`Ready=False, ChildRefused` with the server's message), which the roll-up keeps until a
reconcile of the same generation applies every child (`refusal` reads it back).

`transitions` says which conditions a new status changed, for the Kubernetes Events the operator
posts: compared with the stored status, so a steady state, a replay or a restarted operator posts none.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from liveplex.operator import names, spec
from liveplex.operator.pool import LoadFigures

Json = Mapping[str, Any]


class Reason(enum.StrEnum):
    """Every condition reason (platform §3.2)."""

    ALL_REPLICAS_READY = "AllReplicasReady"
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    MODEL_LOADING = "ModelLoading"
    PODS_NOT_READY = "PodsNotReady"
    INVALID_SPEC = "InvalidSpec"
    IMAGE_PULL_FAILING = "ImagePullFailing"
    ROUTE_CONFLICT = "RouteConflict"
    CHILD_REFUSED = "ChildRefused"
    ROLLING_OUT = "RollingOut"
    SCALING = "Scaling"
    ROLLOUT_COMPLETE = "RolloutComplete"
    TICK_LATENESS_OVER_BUDGET = "TickLatenessOverBudget"
    TICK_LATENESS_WITHIN_BUDGET = "TickLatenessWithinBudget"
    ALL_SLOTS_IN_USE = "AllSlotsInUse"
    HEADROOM_AVAILABLE = "HeadroomAvailable"
    AUTOSCALER_RENDERED = "AutoscalerRendered"
    AUTOSCALER_CONFLICT = "AutoscalerConflict"


WARNINGS = frozenset({Reason.INVALID_SPEC, Reason.CHILD_REFUSED, Reason.ROUTE_CONFLICT, Reason.IMAGE_PULL_FAILING,
                      Reason.INSUFFICIENT_CAPACITY, Reason.TICK_LATENESS_OVER_BUDGET, Reason.ALL_SLOTS_IN_USE,
                      Reason.AUTOSCALER_CONFLICT})
"""Reasons whose Event is a `Warning`: something a user may have to act on. The others are `Normal`."""

IMAGE_PULL_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
"""Container `waiting.reason`s that mean the image cannot be had."""

_FALSE_WHEN_ABSENT = {"Progressing": Reason.ROLLOUT_COMPLETE, "Degraded": Reason.TICK_LATENESS_WITHIN_BUDGET,
                      "CapacityExhausted": Reason.HEADROOM_AVAILABLE}


def timestamp(now: datetime) -> str:
    """RFC 3339 in UTC, whole seconds, as metav1.Time serialises."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def refusal(le: Json) -> str | None:
    """The message of this generation's refused child, as the status records it; None if none was."""
    generation = int(le["metadata"].get("generation", 0))
    for c in (le.get("status") or {}).get("conditions", ()):
        if (c["type"], c.get("reason"), c.get("observedGeneration")) == ("Ready", Reason.CHILD_REFUSED, generation):
            return str(c.get("message", ""))
    return None


@dataclass(frozen=True, slots=True)
class Transition:
    """A condition whose status or reason changed: one Kubernetes Event."""

    condition: str
    status: str
    reason: str
    message: str

    @property
    def warning(self) -> bool:
        return self.reason in WARNINGS

    @property
    def event_type(self) -> str:
        return "Warning" if self.warning else "Normal"

    @property
    def note(self) -> str:
        """The Event's message, which `kubectl describe` shows beside the reason."""
        return f"{self.condition}={self.status}" + (f": {self.message}" if self.message else "")


def transitions(before: Json, after: Json) -> list[Transition]:
    """The conditions of status `after` whose status or reason differ from status `before`'s. A new
    message under the same reason ("1/2" then "2/2 replicas ready") is no transition. A condition new
    to the status counts from its value when absent, so a new LiveEngine reports its Ready and
    Progressing, not that it is not Degraded."""
    old = {c["type"]: c for c in before.get("conditions", ())}
    out = []
    for c in after.get("conditions", ()):
        was = old.get(c["type"]) or (_previous(before, c["type"]) if c["type"] in _FALSE_WHEN_ABSENT else {})
        if (was.get("status"), was.get("reason")) != (c["status"], c["reason"]):
            out.append(Transition(c["type"], c["status"], c["reason"], c.get("message", "")))
    return out


def compute_status(le: Json, deployment: Json | None, pods: Sequence[Json], load: LoadFigures | None,
                   now: datetime, *, conflicts: Sequence[str] = (),
                   foreign_autoscalers: Sequence[str] = (), refused: str | None = None) -> dict[str, Any]:
    """The LiveEngine's whole status; `conflicts` are model names another LiveEngine kept,
    `foreign_autoscalers` the other autoscalers (`Kind/name`) that target it, `refused` the API
    server's answer to a child it would not take."""
    previous: Json = le.get("status") or {}
    meta = le["metadata"]
    generation = int(meta.get("generation", 0))
    dep_status: Json = (deployment or {}).get("status", {})
    try:
        engine: spec.EngineSpec | None = spec.parse(le).spec
        error: spec.SpecError | None = None
    except spec.SpecError as exc:
        engine, error = None, exc
    desired = engine.replicas if engine is not None else int((deployment or {}).get("spec", {}).get("replicas", 0))
    ready = int(dep_status.get("readyReplicas", 0))

    figures = _figures(load, previous)
    if error is not None or refused is not None:
        first = _invalid(error) if error is not None else _condition("Ready", False, Reason.CHILD_REFUSED,
                                                                     refused or "")
        conds = [first, _previous(previous, "Progressing"), _previous(previous, "Degraded")]
    else:
        assert engine is not None
        conds = [_ready(desired, ready, pods, deployment, conflicts), _progressing(desired, deployment),
                 _degraded(engine, load, previous)]
    conds.append(_exhausted(load) if load is not None else _previous(previous, "CapacityExhausted"))
    if engine is not None:
        conds += _autoscaling(engine, foreign_autoscalers)
    conds += [_previous(previous, "Autoscaling")] if error is not None and _has(previous, "Autoscaling") else []
    by_type = {c["type"]: c for c in previous.get("conditions", ())}
    conditions = [_stamped(c, by_type.get(c["type"]), generation, now) for c in conds]
    return {
        "observedGeneration": generation,
        "replicas": int(dep_status.get("replicas", 0)),
        "readyReplicas": ready,
        "updatedReplicas": int(dep_status.get("updatedReplicas", 0)),
        "selector": names.selector_text(meta["name"]),
        **figures,
        "phase": _phase({c["type"]: c for c in conditions}),
        "conditions": conditions,
    }


def _figures(load: LoadFigures | None, previous: Json) -> dict[str, Any]:
    if load is None:
        return {key: previous.get(key, default) for key, default in (
            ("sessions", {"active": 0, "reserved": 0, "capacity": 0}), ("occupancyPercent", 0),
            ("tick", {"p99LatenessMillis": 0, "lateTickPermille": 0}))}
    used = load.active + load.reserved
    return {
        "sessions": {"active": load.active, "reserved": load.reserved, "capacity": load.capacity},
        "occupancyPercent": (100 * used + load.capacity // 2) // load.capacity if load.capacity else 0,
        "tick": {"p99LatenessMillis": load.p99_lateness_ms, "lateTickPermille": load.late_permille},
    }


def _condition(type_: str, status: bool, reason: Reason, message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": "True" if status else "False", "reason": str(reason), "message": message}


def _previous(previous: Json, type_: str) -> dict[str, Any]:
    for c in previous.get("conditions", ()):
        if c["type"] == type_:
            return {k: c[k] for k in ("type", "status", "reason", "message")}
    return _condition(type_, False, _FALSE_WHEN_ABSENT[type_])


def _stamped(cond: dict[str, Any], before: Json | None, generation: int, now: datetime) -> dict[str, Any]:
    """The metav1.Condition: `lastTransitionTime` kept unless `status` flipped."""
    if before is None or before.get("status") != cond["status"] or "lastTransitionTime" not in before:
        since = timestamp(now)
    else:
        since = before["lastTransitionTime"]
    return {**cond, "lastTransitionTime": since, "observedGeneration": generation}


def _invalid(error: spec.SpecError) -> dict[str, Any]:
    return _condition("Ready", False, Reason.INVALID_SPEC, str(error))


def _ready(desired: int, ready: int, pods: Sequence[Json], deployment: Json | None,
           conflicts: Sequence[str]) -> dict[str, Any]:
    if conflicts:
        return _condition("Ready", False, Reason.ROUTE_CONFLICT,
                          f"an older LiveEngine serves {', '.join(sorted(conflicts))}")
    counts = f"{ready}/{desired} replicas ready"
    if desired > 0 and ready >= desired:
        return _condition("Ready", True, Reason.ALL_REPLICAS_READY, counts)
    live = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
    for pod in live:
        for cs in _container_statuses(pod):
            waiting = cs.get("state", {}).get("waiting", {})
            if waiting.get("reason") in IMAGE_PULL_ERRORS:
                return _condition("Ready", False, Reason.IMAGE_PULL_FAILING,
                                  _joined(counts, waiting["reason"], waiting.get("message", "")))
    unschedulable = [c for p in live for c in p.get("status", {}).get("conditions", ())
                     if c.get("type") == "PodScheduled" and c.get("status") == "False"
                     and c.get("reason") == "Unschedulable"]
    failure = _deployment_condition(deployment, "ReplicaFailure")
    if unschedulable or (failure is not None and failure.get("status") == "True"):
        detail = (unschedulable[0] if unschedulable else failure or {}).get("message", "")
        return _condition("Ready", False, Reason.INSUFFICIENT_CAPACITY, _joined(counts, detail))
    if any(cs.get("state", {}).get("running") is not None and not cs.get("started", False)
           for p in live for cs in _container_statuses(p)):
        return _condition("Ready", False, Reason.MODEL_LOADING, _joined(counts, "loading the model and warming up"))
    why = "spec.replicas is 0" if desired == 0 else counts
    return _condition("Ready", False, Reason.PODS_NOT_READY, why)


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def _container_statuses(pod: Json) -> Sequence[Json]:
    return [cs for cs in pod.get("status", {}).get("containerStatuses", ()) if cs.get("name") == names.CONTAINER]


def _deployment_condition(deployment: Json | None, type_: str) -> Json | None:
    for c in (deployment or {}).get("status", {}).get("conditions", ()):
        if c.get("type") == type_:
            return c
    return None


def _progressing(desired: int, deployment: Json | None) -> dict[str, Any]:
    """Rolling out a template, scaling, or done: from the Deployment's own counts."""
    if deployment is None:
        return _condition("Progressing", True, Reason.ROLLING_OUT, "creating the Deployment")
    st: Json = deployment.get("status", {})
    total, updated = int(st.get("replicas", 0)), int(st.get("updatedReplicas", 0))
    available = int(st.get("availableReplicas", 0))
    unobserved = int(st.get("observedGeneration", 0)) < int(deployment["metadata"].get("generation", 0))
    if unobserved or updated < total:
        return _condition("Progressing", True, Reason.ROLLING_OUT, f"{updated}/{total} pods updated")
    if int(deployment.get("spec", {}).get("replicas", 0)) != desired or total != desired:
        return _condition("Progressing", True, Reason.SCALING, f"{total} -> {desired} replicas")
    if available < desired:
        rolled = _deployment_condition(deployment, "Progressing")
        done = rolled is not None and rolled.get("reason") == "NewReplicaSetAvailable"
        return _condition("Progressing", True, Reason.SCALING if done else Reason.ROLLING_OUT,
                          f"{available}/{desired} pods available")
    return _condition("Progressing", False, Reason.ROLLOUT_COMPLETE, f"{desired} pods available")


def _degraded(engine: spec.EngineSpec, load: LoadFigures | None, previous: Json) -> dict[str, Any]:
    if load is None:
        return _previous(previous, "Degraded")
    budget = engine.capacity.lateness_budget_millis
    before = previous.get("tick", {}).get("p99LatenessMillis")
    now_over = load.p99_lateness_ms > budget
    if now_over and before is not None and before > budget:
        return _condition("Degraded", True, Reason.TICK_LATENESS_OVER_BUDGET,
                          f"p99 tick lateness over the {budget} ms budget on two consecutive roll-ups")
    if now_over:
        return _condition("Degraded", False, Reason.TICK_LATENESS_WITHIN_BUDGET,
                          f"p99 tick lateness over the {budget} ms budget once")
    return _condition("Degraded", False, Reason.TICK_LATENESS_WITHIN_BUDGET, f"within the {budget} ms budget")


def _exhausted(load: LoadFigures) -> dict[str, Any]:
    used = load.active + load.reserved
    if load.capacity > 0 and used >= load.capacity:
        return _condition("CapacityExhausted", True, Reason.ALL_SLOTS_IN_USE, "every slot is in use")
    if load.capacity == 0:
        return _condition("CapacityExhausted", False, Reason.HEADROOM_AVAILABLE, "no pod advertises capacity")
    return _condition("CapacityExhausted", False, Reason.HEADROOM_AVAILABLE, "free slots remain")


def _has(previous: Json, type_: str) -> bool:
    return any(c["type"] == type_ for c in previous.get("conditions", ()))


def _autoscaling(engine: spec.EngineSpec, foreign: Sequence[str]) -> list[dict[str, Any]]:
    """Present only while `spec.autoscaling.enabled`: whether the operator's autoscaler drives replicas."""
    a = engine.autoscaling
    if a is None or not a.enabled:
        return []
    if foreign:
        return [_condition("Autoscaling", False, Reason.AUTOSCALER_CONFLICT,
                           f"{', '.join(foreign)} already targets this LiveEngine; rendering none")]
    kind = "HorizontalPodAutoscaler" if a.provider == "hpa" else "ScaledObject"
    return [_condition("Autoscaling", True, Reason.AUTOSCALER_RENDERED,
                       f"{kind} drives spec.replicas between {a.min_replicas} and {a.max_replicas}")]


def _phase(conds: Mapping[str, Json]) -> str:
    """For display: Failed needs a user, then Degraded, Progressing, Ready, else Pending."""
    ready = conds["Ready"]
    if ready["reason"] in (Reason.INVALID_SPEC, Reason.ROUTE_CONFLICT, Reason.CHILD_REFUSED):
        return "Failed"
    if conds["Degraded"]["status"] == "True":
        return "Degraded"
    if conds["Progressing"]["status"] == "True":
        return "Progressing"
    return "Ready" if ready["status"] == "True" else "Pending"
