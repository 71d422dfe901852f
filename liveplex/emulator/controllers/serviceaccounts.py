"""The ServiceAccount controller as a pure plan: every active namespace has a `default` ServiceAccount.

Development emulator, not for production. Pure. As kube-controller-manager's, so a pod that names
no ServiceAccount runs as `default`, and `kubectl create token default` finds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from liveplex.emulator.apiserver import kinds

DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class CreateDefault:
    namespace: str


def plan(snapshot: Iterable[tuple[kinds.ResourceType, dict]]) -> list[CreateDefault]:
    namespaces, having = [], set()
    for rt, obj in snapshot:
        meta = obj["metadata"]
        if rt.key == kinds.NAMESPACE_KEY and not meta.get("deletionTimestamp"):
            namespaces.append(meta["name"])
        elif rt.key == kinds.SERVICE_ACCOUNT_KEY and meta["name"] == DEFAULT:
            having.add(meta.get("namespace", ""))
    return [CreateDefault(ns) for ns in namespaces if ns not in having]
