"""Contract: custom resources are refused by their CRD's CEL rules and schema as a real API server does,
and a CRD that a real server refuses (not structural, invalid defaults, rules that don't compile) is refused.

Written against the official client so the opt-in suite runs it on a real cluster (`tests/e2e_cluster/`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes
import pytest

from liveplex.operator import crd as liveengine_crd
from liveplex.operator import names

from .contract import Kube, causes, contract_emulator, kube, refusal  # noqa: F401 (fixtures)

GROUP, PLURAL, KIND = "contract.liveplex.io", "gadgets", "Gadget"
_STRING_SET = {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
_SPEC_SCHEMA = {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.low <= self.high", "message": "low must not exceed high", "fieldPath": ".low"},
        {"rule": "self.zone == oldSelf.zone", "message": "zone is immutable"},
        {"rule": "self.tags.all(t, t.lowerAscii() == t)", "message": "tags must be lower case"}],
    "properties": {
        "low": {"type": "integer", "default": 0},
        "high": {"type": "integer", "default": 10},
        "zone": {"type": "string", "default": "a"},
        "tags": {**_STRING_SET, "default": []},
        "labels": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"],
                            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
    },
}
_SCHEMA = {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('g-')",
                                  "message": "the name must start with g-"}],
    "properties": {"spec": _SPEC_SCHEMA,
                   "status": {"type": "object", "properties": {"seen": {"type": "string", "format": "date-time"}}}},
}
GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": PLURAL, "singular": "gadget", "kind": KIND},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": _SCHEMA}}]},
}


def _gadget(name: str = "g-1", **spec: object) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": KIND, "metadata": {"name": name}, "spec": spec}


def _established(kube: Kube, name: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        conditions = kube.crds.read_custom_resource_definition(name).status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            return
        assert time.monotonic() < deadline, f"{name} not Established"
        time.sleep(0.2)


@pytest.fixture
def gadgets(kube: Kube) -> Iterator[Kube]:
    kube.crds.create_custom_resource_definition(GADGET_CRD)
    _established(kube, GADGET_CRD["metadata"]["name"])
    try:
        yield kube
    finally:
        kube.crds.delete_custom_resource_definition(GADGET_CRD["metadata"]["name"])
        deadline = time.monotonic() + 30  # its resources go first; the next test creates it again
        while any(c.metadata.name == GADGET_CRD["metadata"]["name"]
                  for c in kube.crds.list_custom_resource_definition().items):
            assert time.monotonic() < deadline, "the CRD was not removed"
            time.sleep(0.05)


def _create(kube: Kube, body: dict) -> dict:
    return kube.custom.create_namespaced_custom_object(GROUP, "v1", kube.namespace, PLURAL, body)


def _refused(call: object, *args: object) -> dict:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call(*args)  # type: ignore[operator]
    return refusal(caught)


def test_a_rule_on_a_node_names_its_field_and_message(gadgets: Kube) -> None:
    status = _refused(_create, gadgets, _gadget(low=5, high=1))
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert causes(status) == {"spec.low": ['Invalid value: "object": low must not exceed high']}
    assert status["message"] == (f'{KIND}.{GROUP} "g-1" is invalid: spec.low: Invalid value: "object": low must '
                                 "not exceed high")


def test_a_root_rule_and_a_kubernetes_string_extension(gadgets: Kube) -> None:
    found = causes(_refused(_create, gadgets, _gadget("x-1")))
    assert found == {"<nil>": ['Invalid value: "object": the name must start with g-']}
    found = causes(_refused(_create, gadgets, _gadget(tags=["Loud"])))
    assert found == {"spec": ['Invalid value: "object": tags must be lower case']}


def test_a_transition_rule_runs_on_update_only(gadgets: Kube) -> None:
    created = _create(gadgets, _gadget(zone="a"))
    assert created["spec"] == {"low": 0, "high": 10, "zone": "a", "tags": []}
    status = _refused(gadgets.custom.patch_namespaced_custom_object, GROUP, "v1", gadgets.namespace, PLURAL, "g-1",
                      {"spec": {"zone": "b"}})
    assert causes(status) == {"spec": ['Invalid value: "object": zone is immutable']}
    patched = gadgets.custom.patch_namespaced_custom_object(GROUP, "v1", gadgets.namespace, PLURAL, "g-1",
                                                            {"spec": {"high": 20}})
    assert patched["spec"]["high"] == 20


def test_max_properties_list_uniqueness_and_date_time(gadgets: Kube) -> None:
    found = causes(_refused(_create, gadgets, _gadget(labels={"a": "1", "b": "2", "c": "3"},
                                                      tags=["x", "x"], ports=[{"name": "p"}, {"name": "p"}])))
    assert found["spec.labels"] == ["Too many: 3: must have at most 2 items"]
    assert found["spec.tags[1]"] == ['Duplicate value: "x"']
    assert found["spec.ports[1]"] == ['Duplicate value: {"name":"p"}']
    _create(gadgets, _gadget())
    status = _refused(gadgets.custom.patch_namespaced_custom_object_status, GROUP, "v1", gadgets.namespace, PLURAL,
                      "g-1", {"status": {"seen": "yesterday"}})
    assert list(causes(status)) == ["status.seen"]
    written = gadgets.custom.patch_namespaced_custom_object_status(
        GROUP, "v1", gadgets.namespace, PLURAL, "g-1", {"status": {"seen": "2026-01-01T00:00:00Z"}})
    assert written["status"]["seen"] == "2026-01-01T00:00:00Z"


def _broken(**schema_changes: object) -> dict:
    crd = {**GADGET_CRD, "metadata": {"name": f"broken{PLURAL}.{GROUP}"}}
    spec = dict(GADGET_CRD["spec"], names={"plural": f"broken{PLURAL}", "kind": f"Broken{KIND}"})
    version = dict(spec["versions"][0], schema={"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", **schema_changes}}}})
    return {**crd, "spec": {**spec, "versions": [version]}}


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"x-kubernetes-validations": [{"rule": "self.a.noSuchFunction()"}]},
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule", "compil"),
    ({"x-kubernetes-validations": [{"rule": "self.a +"}]},
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule", "compil"),
    ({"properties": {"n": {"type": "integer", "minimum": 1, "default": 0}}},
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[n].default", "greater than or equal to 1"),
    ({"properties": {"n": {"properties": {"x": {"type": "string"}}}}},
     "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[n].type", "must not be empty"),
])
def test_a_crd_a_real_server_refuses_is_refused(kube: Kube, changes: dict, field: str, words: str) -> None:
    status = _refused(kube.crds.create_custom_resource_definition, _broken(**changes))
    assert status["code"] == 422
    assert any(words in m for m in causes(status)[field]), causes(status)


def test_the_issue_example_the_liveengine_crds_cel_rules_refuse_at_admission(kube: Kube) -> None:
    crd = liveengine_crd.render_crd()
    try:
        kube.crds.create_custom_resource_definition(crd)
    except kubernetes.client.ApiException as exc:  # a real cluster that runs liveplex has it already
        assert exc.status == 409
    _established(kube, crd["metadata"]["name"])
    body = {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "sim"},
            "spec": {"engine": {"kind": "sim"}, "capacity": {"jitterFrames": 2, "prebufferFrames": 3},
                     "pod": {"labels": {names.INSTANCE_LABEL: "other"}}}}
    status = _refused(kube.custom.create_namespaced_custom_object, names.GROUP, names.VERSION, kube.namespace,
                      names.PLURAL, body)
    found = causes(status)
    assert found["spec.capacity"] == ['Invalid value: "object": spec.capacity.prebufferFrames must not exceed '
                                      "spec.capacity.jitterFrames"]
    assert list(found) == ["spec.capacity", "spec.pod.labels"]
