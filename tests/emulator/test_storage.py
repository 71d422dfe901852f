"""The store's write rules, driven directly with a fixed clock: one test per fidelity row of platform §11."""

from __future__ import annotations

import pytest

from liveplex.emulator.apiserver import errors, kinds, storage

from .conftest import install_widgets
from .objects import widget


@pytest.fixture
def store() -> storage.Store:
    s = storage.Store(lambda: 1_700_000_000.0, history=50)
    s.create(s.registry.by_key(kinds.NAMESPACE_KEY), "", {"metadata": {"name": "default"}})
    return s


def test_resource_versions_increase_with_every_write_and_lists_carry_the_latest(store: storage.Store) -> None:
    rt = install_widgets(store)
    seen = [int(store.create(rt, "default", widget(f"w{n}"))["metadata"]["resourceVersion"]) for n in range(3)]
    items, rv = store.list(rt, "default")
    assert seen == sorted(seen) and len(set(seen)) == 3
    assert rv >= seen[-1] and [i["metadata"]["name"] for i in items] == ["w0", "w1", "w2"]


def test_create_twice_is_409_already_exists(store: storage.Store) -> None:
    rt = install_widgets(store)
    store.create(rt, "default", widget("w"))
    with pytest.raises(errors.ApiError) as caught:
        store.create(rt, "default", widget("w"))
    assert (caught.value.code, caught.value.reason) == (409, "AlreadyExists")


def test_update_with_a_stale_resource_version_is_409_conflict(store: storage.Store) -> None:
    rt = install_widgets(store)
    old = store.create(rt, "default", widget("w"))
    store.patch(rt, "default", "w", storage.MERGE, {"spec": {"replicas": 2}})
    with pytest.raises(errors.ApiError) as caught:
        store.update(rt, "default", "w", old)
    assert (caught.value.code, caught.value.reason) == (409, "Conflict")


def test_generation_moves_only_on_spec_changes(store: storage.Store) -> None:
    rt = install_widgets(store)
    assert store.create(rt, "default", widget("w"))["metadata"]["generation"] == 1
    store.patch(rt, "default", "w", storage.MERGE, {"metadata": {"labels": {"a": "b"}}})
    store.patch(rt, "default", "w", storage.MERGE, {"status": {"phase": "Ready"}}, "status")
    assert store.get(rt, "default", "w")["metadata"]["generation"] == 1
    store.patch(rt, "default", "w", storage.MERGE, {"spec": {"replicas": 4}})
    assert store.get(rt, "default", "w")["metadata"]["generation"] == 2


def test_status_writes_change_only_status_and_main_writes_never_change_it(store: storage.Store) -> None:
    rt = install_widgets(store)
    store.create(rt, "default", dict(widget("w", replicas=1), status={"phase": "Ignored"}))
    assert "status" not in store.get(rt, "default", "w")
    store.patch(rt, "default", "w", storage.MERGE, {"spec": {"replicas": 9}, "status": {"phase": "Ready"}}, "status")
    after = store.get(rt, "default", "w")
    assert after["status"] == {"phase": "Ready"} and after["spec"]["replicas"] == 1
    store.patch(rt, "default", "w", storage.MERGE, {"spec": {"replicas": 2}, "status": {"phase": "Lost"}})
    after = store.get(rt, "default", "w")
    assert after["status"] == {"phase": "Ready"} and after["spec"]["replicas"] == 2


def test_a_write_that_changes_nothing_keeps_the_resource_version_and_tells_no_watcher(store: storage.Store) -> None:
    rt = install_widgets(store)
    before = store.create(rt, "default", widget("w", replicas=2))
    heard: list[storage.Change] = []
    store.subscribe(heard.append)
    store.patch(rt, "default", "w", storage.MERGE, {"spec": {"replicas": 2}})
    assert store.get(rt, "default", "w")["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert heard == []


def test_scale_reads_and_writes_through_the_crd_scale_paths(store: storage.Store) -> None:
    rt = install_widgets(store)
    store.create(rt, "default", widget("w", replicas=2))
    store.patch(rt, "default", "w", storage.MERGE, {"status": {"replicas": 1, "selector": "app=w"}}, "status")
    scale = store.get_scale(rt, "default", "w")
    assert (scale["kind"], scale["apiVersion"], scale["spec"], scale["status"]) == (
        "Scale", "autoscaling/v1", {"replicas": 2}, {"replicas": 1, "selector": "app=w"})
    store.patch_scale(rt, "default", "w", storage.MERGE, {"spec": {"replicas": 5}})
    after = store.get(rt, "default", "w")
    assert after["spec"]["replicas"] == 5 and after["metadata"]["generation"] == 2


def test_finalizers_hold_a_deleted_object_until_the_last_one_goes(store: storage.Store) -> None:
    rt = install_widgets(store)
    store.create(rt, "default", dict(widget("w"), metadata={"name": "w", "finalizers": ["x/a", "x/b"]}))
    marked = store.delete(rt, "default", "w")
    assert marked["metadata"]["deletionTimestamp"] and store.find(rt, "default", "w") is not None
    store.patch(rt, "default", "w", storage.JSON_PATCH, [{"op": "remove", "path": "/metadata/finalizers/0"}])
    assert store.find(rt, "default", "w") is not None
    store.patch(rt, "default", "w", storage.MERGE, {"metadata": {"finalizers": None}})
    assert store.find(rt, "default", "w") is None


def test_changes_resume_strictly_after_a_resource_version_and_expire_as_410(store: storage.Store) -> None:
    rt = install_widgets(store)
    first = int(store.create(rt, "default", widget("a"))["metadata"]["resourceVersion"])
    store.create(rt, "default", widget("b"))
    assert [c.object["metadata"]["name"] for c in store.changes_since(first)] == ["b"]
    for n in range(60):
        store.create(rt, "default", widget(f"x{n}"))
    with pytest.raises(errors.ApiError) as caught:
        store.changes_since(first)
    assert (caught.value.code, caught.value.reason) == (410, "Expired")


def test_a_crd_installs_its_type_and_goes_with_its_objects_once_its_finalizer_is_dropped(store: storage.Store) -> None:
    rt = install_widgets(store)
    store.create(rt, "default", widget("w"))
    crd = store.get(store.registry.by_key(kinds.CRD_KEY), "", "widgets.test.liveplex.io")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]} == {"NamesAccepted": "True",
                                                                             "Established": "True"}
    crds = store.registry.by_key(kinds.CRD_KEY)
    store.delete(crds, "", "widgets.test.liveplex.io")  # held by its cleanup finalizer
    assert store.get(crds, "", "widgets.test.liveplex.io")["metadata"]["finalizers"] == [kinds.CRD_CLEANUP]
    with pytest.raises(errors.ApiError) as terminating:
        store.create(rt, "default", widget("x"))
    assert terminating.value.code == 405
    store.delete(rt, "default", "w")
    store.patch(crds, "", "widgets.test.liveplex.io", storage.MERGE, {"metadata": {"finalizers": None}})
    assert store.registry.find_key(rt.key) is None and store.list(rt)[0] == []


def test_custom_resources_are_defaulted_pruned_and_validated(store: storage.Store) -> None:
    rt = install_widgets(store)
    created = store.create(rt, "default", widget("w", typo=1), validation="Ignore")
    assert created["spec"] == {"replicas": 1, "color": "red"}
    with pytest.raises(errors.ApiError) as strict:
        store.create(rt, "default", widget("v", typo=1), validation="Strict")
    assert strict.value.code == 400 and 'unknown field "spec.typo"' in strict.value.message
    with pytest.raises(errors.ApiError) as invalid:
        store.create(rt, "default", widget("u", replicas=-1, color="green"))
    assert invalid.value.code == 422
    assert {c.field for c in invalid.value.causes} == {"spec.replicas", "spec.color"}


def test_a_bound_pod_is_deleted_gracefully_and_an_unbound_one_at_once(store: storage.Store) -> None:
    pods = store.registry.by_key(kinds.POD_KEY)
    spec = {"containers": [{"name": "c", "image": "x"}], "terminationGracePeriodSeconds": 7}
    store.create(pods, "default", {"metadata": {"name": "bound"}, "spec": dict(spec, nodeName="n")})
    store.create(pods, "default", {"metadata": {"name": "loose"}, "spec": spec})
    marked = store.delete(pods, "default", "bound")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 7
    assert marked["metadata"]["deletionTimestamp"] == storage.stamp(1_700_000_007)
    store.delete(pods, "default", "loose")
    assert store.find(pods, "default", "loose") is None and store.find(pods, "default", "bound") is not None
    store.delete(pods, "default", "bound", storage.DeleteOptions(grace_seconds=0))
    assert store.find(pods, "default", "bound") is None


@pytest.mark.parametrize(("grace", "stamped", "kept"), [
    (2 ** 63 - 1, 1_700_000_000 - 1, 2 ** 63 - 1),  # Go's int64 nanoseconds wrap: now minus 1 s
    (10 ** 12, 1_700_000_000 + storage.go_seconds(10 ** 12), 10 ** 12), (-5, 1_700_000_001, 1)])
def test_a_grace_period_is_upstream_s_whatever_its_size(store: storage.Store, grace: int, stamped: float,
                                                         kept: int) -> None:
    """BeforeDelete takes any int64 (a negative one is 1 s) and stamps `now + time.Second * grace` as Go
    computes it, where Python's clock would overflow."""
    pods = store.registry.by_key(kinds.POD_KEY)
    store.create(pods, "default", {"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [
        {"name": "c", "image": "x"}]}})
    marked = store.delete(pods, "default", "p", storage.DeleteOptions(grace_seconds=grace))
    assert (marked["metadata"]["deletionTimestamp"], marked["metadata"]["deletionGracePeriodSeconds"]) == (
        storage.stamp(stamped), kept)


def test_a_write_from_1_to_true_is_a_change(store: storage.Store) -> None:
    """Python's `1 == True` would make it a no-op; the bytes upstream compares differ."""
    rt = install_widgets(store)
    store.create(rt, "default", widget("w"))
    first = store.patch(rt, "default", "w", storage.MERGE, {"status": {"x": 1}}, "status")
    second = store.patch(rt, "default", "w", storage.MERGE, {"status": {"x": True}}, "status")
    assert second["status"]["x"] is True
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_namespaced_writes_need_an_existing_namespace(store: storage.Store) -> None:
    with pytest.raises(errors.ApiError) as caught:
        store.create(store.registry.by_key("/configmaps"), "nowhere", {"metadata": {"name": "c"}})
    assert caught.value.code == 404
