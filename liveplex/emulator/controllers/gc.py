"""The garbage collector and the namespace controller as one pure, level-based plan over all objects.

Development emulator, not for production. Pure: `plan` reads a snapshot and says what to delete.
Background cascade: an object all of whose owners are gone is deleted; one that keeps a live
owner just loses the dangling references. `Orphan` propagation strips the owner's references from
its dependents before the owner goes; `Foreground` deletes the dependents first. A terminating
namespace has its contents deleted and is removed once empty, and so does a deleted CRD (its custom
resources deleted, each honouring its own finalizers, then the CRD's cleanup finalizer dropped, as
apiextensions-apiserver's finalizer controller does). Unlike kube-controller-manager,
owners are matched by uid alone (no check of kind or namespace), and `blockOwnerDeletion` is not
distinguished from other references.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from liveplex.emulator.apiserver import kinds, storage

Entry = tuple[kinds.ResourceType, dict]
"""One object of the snapshot with its type; read-only."""


@dataclass(frozen=True, slots=True)
class Delete:
    rt: kinds.ResourceType
    namespace: str
    name: str
    propagation: str = "Background"


@dataclass(frozen=True, slots=True)
class DropOwners:
    """Remove the ownerReferences with these uids from the object."""

    rt: kinds.ResourceType
    namespace: str
    name: str
    uids: frozenset[str]


@dataclass(frozen=True, slots=True)
class DropFinalizer:
    rt: kinds.ResourceType
    name: str
    namespace: str
    finalizer: str


@dataclass(frozen=True, slots=True)
class FinalizeNamespace:
    name: str


Action = Delete | DropOwners | DropFinalizer | FinalizeNamespace


def _where(rt: kinds.ResourceType, obj: dict) -> tuple[kinds.ResourceType, str, str]:
    return rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def plan(snapshot: Iterable[Entry]) -> list[Action]:
    """Everything the collector would do now; applying it and planning again converges."""
    entries = list(snapshot)
    by_uid = {obj["metadata"]["uid"]: (rt, obj) for rt, obj in entries}
    dependents: dict[str, list[Entry]] = defaultdict(list)
    for rt, obj in entries:
        for ref in obj["metadata"].get("ownerReferences") or []:
            dependents[ref.get("uid", "")].append((rt, obj))
    actions: list[Action] = []
    for rt, obj in entries:
        meta = obj["metadata"]
        refs = [r.get("uid", "") for r in meta.get("ownerReferences") or []]
        dead = frozenset(u for u in refs if u not in by_uid)
        orphaned_by = frozenset(u for u in refs if u in by_uid and storage.ORPHAN in (
            by_uid[u][1]["metadata"].get("finalizers") or []) and by_uid[u][1]["metadata"].get("deletionTimestamp"))
        if refs and dead and len(dead) == len(set(refs)):
            if not meta.get("deletionTimestamp"):
                actions.append(Delete(*_where(rt, obj)))
        elif dead or orphaned_by:
            actions.append(DropOwners(*_where(rt, obj), dead | orphaned_by))
        if not meta.get("deletionTimestamp"):
            continue
        finalizers = meta.get("finalizers") or []
        children = dependents.get(meta["uid"], [])
        if storage.ORPHAN in finalizers and not children:
            actions.append(DropFinalizer(rt, meta["name"], meta.get("namespace", ""), storage.ORPHAN))
        if storage.FOREGROUND in finalizers:
            actions += [Delete(*_where(crt, child), "Foreground") for crt, child in children
                        if not child["metadata"].get("deletionTimestamp")]
            if not children:
                actions.append(DropFinalizer(rt, meta["name"], meta.get("namespace", ""), storage.FOREGROUND))
        if rt.key == kinds.CRD_KEY and kinds.CRD_CLEANUP in finalizers:
            key = kinds.from_crd(obj).key
            contents = [(crt, o) for crt, o in entries if crt.key == key]
            actions += [Delete(*_where(crt, o)) for crt, o in contents if not o["metadata"].get("deletionTimestamp")]
            if not contents:
                actions.append(DropFinalizer(rt, meta["name"], "", kinds.CRD_CLEANUP))
        if rt.key == kinds.NAMESPACE_KEY:
            contents = [(crt, o) for crt, o in entries if crt.namespaced and o["metadata"].get("namespace") == meta[
                "name"]]
            actions += [Delete(*_where(crt, o)) for crt, o in contents if not o["metadata"].get("deletionTimestamp")]
            if not contents:
                actions.append(FinalizeNamespace(meta["name"]))
    return actions
