"""The garbage collector's plan: background cascade, dangling references, Orphan, Foreground, namespaces."""

from __future__ import annotations

from liveplex.emulator.apiserver import kinds, storage
from liveplex.emulator.controllers import gc

REGISTRY = kinds.Registry()
CM, NS = REGISTRY.by_key("/configmaps"), REGISTRY.by_key(kinds.NAMESPACE_KEY)


def obj(name: str, *owners: str, finalizers: tuple[str, ...] = (), deleting: bool = False) -> dict:
    meta: dict = {"name": name, "namespace": "ns", "uid": name,
                  "ownerReferences": [{"uid": o, "name": o, "kind": "ConfigMap", "apiVersion": "v1"} for o in owners]}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": meta}


def test_an_object_whose_owners_are_all_gone_is_deleted() -> None:
    assert gc.plan([(CM, obj("child", "gone"))]) == [gc.Delete(CM, "ns", "child")]


def test_an_object_with_a_live_owner_only_loses_the_dangling_reference() -> None:
    assert gc.plan([(CM, obj("owner")), (CM, obj("child", "owner", "gone"))]) == [
        gc.DropOwners(CM, "ns", "child", frozenset({"gone"}))]


def test_orphan_propagation_strips_references_then_lets_the_owner_go() -> None:
    owner = obj("owner", finalizers=(storage.ORPHAN,), deleting=True)
    assert gc.plan([(CM, owner), (CM, obj("child", "owner"))]) == [
        gc.DropOwners(CM, "ns", "child", frozenset({"owner"}))]
    assert gc.plan([(CM, owner), (CM, obj("child"))]) == [gc.DropFinalizer(CM, "owner", "ns", storage.ORPHAN)]


def test_foreground_propagation_deletes_dependents_before_the_owner() -> None:
    owner = obj("owner", finalizers=(storage.FOREGROUND,), deleting=True)
    assert gc.plan([(CM, owner), (CM, obj("child", "owner"))]) == [gc.Delete(CM, "ns", "child", "Foreground")]
    assert gc.plan([(CM, owner)]) == [gc.DropFinalizer(CM, "owner", "ns", storage.FOREGROUND)]


def test_a_terminating_namespace_is_emptied_then_finalized() -> None:
    namespace = {"metadata": {"name": "ns", "uid": "ns-uid", "deletionTimestamp": "2025-01-01T00:00:00Z"}}
    assert gc.plan([(NS, namespace), (CM, obj("c"))]) == [gc.Delete(CM, "ns", "c")]
    assert gc.plan([(NS, namespace)]) == [gc.FinalizeNamespace("ns")]


def test_nothing_to_do_when_every_owner_is_alive() -> None:
    assert gc.plan([(CM, obj("owner")), (CM, obj("child", "owner"))]) == []


def test_a_deleted_crd_deletes_its_resources_then_drops_its_cleanup_finalizer() -> None:
    from .objects import WIDGET_CRD

    crd = {**WIDGET_CRD, "metadata": {"name": WIDGET_CRD["metadata"]["name"], "uid": "crd",
                                      "finalizers": [kinds.CRD_CLEANUP], "deletionTimestamp": "2025-01-01T00:00:00Z"}}
    widgets = kinds.from_crd(crd)
    crds = REGISTRY.by_key(kinds.CRD_KEY)
    held = obj("w", finalizers=("example.com/hold",))
    assert gc.plan([(crds, crd), (widgets, held)]) == [gc.Delete(widgets, "ns", "w")]
    held["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:01Z"
    assert gc.plan([(crds, crd), (widgets, held)]) == []  # the resource's own finalizer holds the CRD
    assert gc.plan([(crds, crd)]) == [gc.DropFinalizer(crds, crd["metadata"]["name"], "", kinds.CRD_CLEANUP)]
