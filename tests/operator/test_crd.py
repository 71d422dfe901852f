"""The generated CRD: valid for Kubernetes, structural, and carrying §3's subresources, columns and rules."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from liveplex.operator import cel, cli, crd, names
from tests.operator import golden, kubeschemas


def _nodes(node: dict[str, Any], path: tuple[str, ...] = ()):
    yield path, node
    for key, sub in node.get("properties", {}).items():
        yield from _nodes(sub, (*path, key))
    if "items" in node:
        yield from _nodes(node["items"], (*path, "[]"))
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], (*path, "*"))


@pytest.mark.parametrize("version", [kubeschemas.LOWEST, kubeschemas.NEWEST])
def test_the_crd_validates_strictly_at_the_lowest_and_newest_minor(version: str) -> None:
    kubeschemas.validate_strict(crd.render_crd(), version)


def test_the_supported_range_is_1_25_to_1_37() -> None:
    assert (kubeschemas.LOWEST, kubeschemas.NEWEST) == ("1.25", "1.37")


def test_the_crd_equals_its_golden_file() -> None:
    golden.assert_golden("crd", crd.render_crd())


def test_rendering_twice_is_identical_and_independent() -> None:
    first = crd.render_crd()
    first["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].clear()
    assert crd.render_crd() == yaml.safe_load(golden.dump(crd.render_crd()))
    assert crd.render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def test_every_node_is_typed_and_only_passthrough_keeps_unknown_fields() -> None:
    preserved = []
    for path, node in _nodes(crd.object_schema()):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            preserved.append(".".join(path))
    assert preserved == ["spec.pod.affinity", "spec.pod.env.[].valueFrom"]


def test_scale_subresource_uses_the_string_selector_and_status_is_a_subresource() -> None:
    version = crd.render_crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}, "scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector"}}
    assert crd.STATUS["properties"]["selector"]["type"] == "string"


def test_printer_columns_follow_the_spec_table() -> None:
    columns = crd.render_crd()["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in columns] == [
        ("READY", '.status.conditions[?(@.type=="Ready")].status', 0),
        ("REASON", '.status.conditions[?(@.type=="Ready")].reason', 0), ("REPLICAS", ".status.replicas", 0),
        ("AVAILABLE", ".status.readyReplicas", 0), ("SESSIONS", ".status.sessions.active", 0),
        ("CAPACITY", ".status.sessions.capacity", 0), ("ENGINE", ".spec.engine.kind", 0),
        ("AGE", ".metadata.creationTimestamp", 0), ("MODEL", ".spec.model.name", 1),
        ("P99-LATE-MS", ".status.tick.p99LatenessMillis", 1)]


def test_names_and_scope() -> None:
    spec = crd.render_crd()["spec"]
    assert spec["group"] == "live.liveplex.io" and spec["scope"] == "Namespaced"
    assert spec["names"]["shortNames"] == ["le"] and spec["versions"][0]["name"] == "v1alpha1"


def test_every_cel_rule_sits_on_its_node_once() -> None:
    schema = crd.object_schema()
    for rule in cel.RULES:
        node = schema
        for key in rule.at:
            node = node["properties"][key]
        assert {"rule": rule.rule, "message": rule.message} in node["x-kubernetes-validations"]
    total = sum(len(n.get("x-kubernetes-validations", ())) for _, n in _nodes(schema))
    assert total == len(cel.RULES)


def test_conditions_are_a_map_keyed_by_type() -> None:
    conditions = crd.STATUS["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map" and conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_the_crd_command_prints_the_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == crd.render_crd()


def test_the_crd_names_the_api_the_operator_watches() -> None:
    assert crd.render_crd()["metadata"]["name"] == f"{names.PLURAL}.{names.GROUP}"


def test_the_attention_backends_are_the_engines_choices() -> None:
    from liveplex.engine_pod import settings  # the operator itself imports no engine code

    assert crd.ATTENTION_BACKENDS == settings.ATTENTION
