"""create-or-patch: creates, is a no-op the second time, removes what it stopped rendering, survives a race."""

from __future__ import annotations

import copy

import pytest

from liveplex.emulator.apiserver.patch import merge_patch
from liveplex.operator import Ref, names
from liveplex.operator import apply as applier
from tests.operator.fake import FakeKubeClient

DESIRED = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "pp", "namespace": "voice", "labels": {"a": "1"}},
           "spec": {"replicas": 2, "template": {"spec": {"nodeSelector": {"gpu": "yes"}, "containers": [
               {"name": "engine", "image": "x:1"}]}}}}
REF = Ref("apps/v1", "Deployment", "voice", "pp")


async def test_create_then_the_second_apply_sends_nothing() -> None:
    client = FakeKubeClient()
    await applier.create_or_patch(client, DESIRED)
    await applier.create_or_patch(client, DESIRED)
    assert [w[0] for w in client.writes] == ["create"]
    assert client.objects[REF]["spec"] == DESIRED["spec"]


async def test_server_defaults_and_foreign_fields_do_not_cause_a_patch_and_survive_one() -> None:
    client = FakeKubeClient()
    await applier.create_or_patch(client, DESIRED)
    stored = client.objects[REF]
    stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = "1"
    stored["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log"
    await applier.create_or_patch(client, DESIRED)
    assert len(client.writes) == 1
    changed = copy.deepcopy(DESIRED)
    changed["spec"]["replicas"] = 3
    await applier.create_or_patch(client, changed)
    assert client.objects[REF]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert client.objects[REF]["spec"]["replicas"] == 3


async def test_a_field_no_longer_rendered_is_removed() -> None:
    client = FakeKubeClient()
    await applier.create_or_patch(client, DESIRED)
    dropped = copy.deepcopy(DESIRED)
    del dropped["spec"]["template"]["spec"]["nodeSelector"]
    await applier.create_or_patch(client, dropped)
    assert "nodeSelector" not in client.objects[REF]["spec"]["template"]["spec"]
    assert client.writes[-1][2]["spec"]["template"]["spec"]["nodeSelector"] is None


async def test_drift_is_patched_back() -> None:
    client = FakeKubeClient()
    await applier.create_or_patch(client, DESIRED)
    client.objects[REF]["spec"]["replicas"] = 9
    await applier.create_or_patch(client, DESIRED)
    assert client.objects[REF]["spec"]["replicas"] == 2 and client.writes[-1][0] == "patch"


async def test_an_object_created_by_someone_else_is_patched_not_recreated() -> None:
    client = FakeKubeClient()
    client.put({**DESIRED, "spec": {"replicas": 1}})
    await applier.create_or_patch(client, DESIRED)
    assert [w[0] for w in client.writes] == ["patch"] and client.objects[REF]["spec"] == DESIRED["spec"]


async def test_losing_a_create_race_falls_back_to_a_patch() -> None:
    class Racing(FakeKubeClient):
        async def get(self, ref: Ref):  # the first read misses the object another writer is creating
            if not self.writes and ref in self.objects and not getattr(self, "raced", False):
                self.raced = True
                return None
            return await super().get(ref)

    client = Racing()
    client.put({**DESIRED, "spec": {"replicas": 1}})
    await applier.create_or_patch(client, DESIRED)
    assert [w[0] for w in client.writes] == ["create", "patch"]
    assert client.objects[REF]["spec"]["replicas"] == 2


def test_the_patch_is_the_desired_object_plus_nulls_for_dropped_keys() -> None:
    last = {"a": 1, "b": {"c": 1, "d": 2}, "l": [1, 2]}
    desired = {"a": 2, "b": {"c": 1}, "l": [1]}
    patch = applier.merge_patch(last, desired)
    assert patch == {"a": 2, "b": {"c": 1, "d": None}, "l": [1]}
    assert merge_patch({"a": 1, "b": {"c": 1, "d": 2}, "l": [1, 2], "x": 0}, patch) == {**desired, "x": 0}


@pytest.mark.parametrize(("current", "desired", "holds"), [
    ({"a": 1, "b": 2}, {"a": 1}, True), ({"a": [{"x": 1, "y": 2}]}, {"a": [{"x": 1}]}, True),
    ({"a": [1, 2]}, {"a": [1]}, False), ({"a": 1}, {"a": 2}, False), ({}, {"a": None}, False),
])
def test_contains(current: dict, desired: dict, holds: bool) -> None:
    assert applier.contains(current, desired) is holds


def test_the_last_applied_record_is_canonical() -> None:
    assert applier.last_applied(applier.recorded(DESIRED)) == DESIRED
    assert names.LAST_APPLIED in applier.recorded(DESIRED)["metadata"]["annotations"]
