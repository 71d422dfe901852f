"""`pod-deletion-cost`: a ReplicaSet scale-down removes the pods with the fewest sessions first.

The value is the pod's active sessions (platform §4 rule 9), a best-effort hint; only changed
values are returned, so the timer patches a pod only when its count moved. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from liveplex.operator import names


def deletion_costs(pods: Sequence[Mapping[str, Any]], active: Mapping[str, int]) -> dict[str, str]:
    """Pod name -> the annotation value to write, for live pods whose value is missing or stale."""
    out = {}
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        cost = str(active.get(meta["name"], 0))
        if meta.get("annotations", {}).get(names.DELETION_COST) != cost:
            out[meta["name"]] = cost
    return out
