"""The eviction API's decision: may this pod go without breaking its PodDisruptionBudget?

Development emulator, not for production. Pure. kube-apiserver reads the budget's status, which the
disruption controller keeps; the emulator has no such controller and counts at the moment of the
eviction instead: the budget's pods are the live pods its selector matches in its namespace,
healthy when Ready. The expected count, for `maxUnavailable` and percentages, is the sum of the
owning controllers' `spec.replicas` as upstream takes it (a pod without a controller counts as
one); an integer `minAvailable` needs none. A healthy pod may go while more pods are healthy than the budget needs; an
unhealthy one while the budget is met (`unhealthyPodEvictionPolicy: IfHealthyBudget`, the default)
or always (`AlwaysAllow`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from liveplex.emulator.apiserver import errors, selectors

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    healthy: int
    desired: int
    expected: int


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return int(value)


def _controller(pod: Obj) -> str | None:
    return next((r.get("uid") for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")), None)


def budget(pdb: Obj, pods: Sequence[Obj], scales: Mapping[str, int]) -> Budget:
    """How many of the budget's pods are healthy, how many it needs, and how many it expects;
    `scales` maps a controller's uid to its `spec.replicas`."""
    spec = pdb.get("spec") or {}
    selector = selectors.from_label_selector(spec.get("selector"))
    mine = [p for p in pods if not p["metadata"].get("deletionTimestamp") and selector
            and selectors.matches_labels(selector, p)]
    owners = {uid for p in mine if (uid := _controller(p)) is not None}
    expected = sum(scales.get(uid, 0) for uid in owners) + sum(_controller(p) is None for p in mine)
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = max(0, expected - _scaled(spec.get("maxUnavailable", 0), expected))
    return Budget(pdb["metadata"]["name"], sum(_ready(p) for p in mine), desired, expected)


def covering(pod: Obj, pdbs: Sequence[Obj]) -> list[Obj]:
    return [b for b in pdbs if (sel := selectors.from_label_selector((b.get("spec") or {}).get("selector")))
            and selectors.matches_labels(sel, pod)]


def check(pod: Obj, pdbs: Sequence[Obj], pods: Sequence[Obj], scales: Mapping[str, int]) -> None:
    """Nothing when the eviction may go ahead; the ApiError upstream answers otherwise."""
    found = covering(pod, pdbs)
    if len(found) > 1:
        raise errors.ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the "
                                                    "eviction subresource does not support.")
    if not found:
        return
    pdb = found[0]
    b = budget(pdb, pods, scales)
    if not _ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        if policy == "AlwaysAllow" or b.healthy >= b.desired:
            return
    elif b.healthy - b.desired >= 1:
        return
    raise errors.ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                          causes=(errors.Cause("", f"The disruption budget {b.name} needs {b.desired} healthy pods "
                                                   f"and has {b.healthy} currently", "DisruptionBudget"),))
