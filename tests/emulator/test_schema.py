"""CRD schemas on write: defaults filled in, undeclared fields pruned, violations named by field."""

from __future__ import annotations

from liveplex.emulator.apiserver import schema

SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "required": ["engine"], "properties": {
        "replicas": {"type": "integer", "minimum": 0, "default": 1},
        "engine": {"type": "object", "properties": {"kind": {"type": "string", "enum": ["sim", "personaplex"]}}},
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
        "pod": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "port": {"x-kubernetes-int-or-string": True},
    }},
    "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
}}


def test_defaults_fill_missing_fields_only() -> None:
    assert schema.apply_defaults({"spec": {}}, SCHEMA) == {"spec": {"replicas": 1}}
    assert schema.apply_defaults({"spec": {"replicas": 3}}, SCHEMA) == {"spec": {"replicas": 3}}


def test_pruning_drops_undeclared_fields_and_keeps_preserved_ones() -> None:
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"},
           "spec": {"replicas": 1, "typo": 2, "pod": {"anything": {"goes": 1}}, "labels": {"a": "b"}},
           "status": {"phase": "Ready", "kopf": {"progress": {}}}}
    pruned, dropped = schema.prune(obj, SCHEMA)
    assert dropped == ["spec.typo", "status.kopf"]
    assert pruned["spec"] == {"replicas": 1, "pod": {"anything": {"goes": 1}}, "labels": {"a": "b"}}
    assert pruned["metadata"] == {"name": "n"}


def test_violations_name_the_field_in_kube_apiserver_words() -> None:
    causes = schema.validate({"spec": {"replicas": -1, "engine": {"kind": "gpu"}, "name": "ABCDEFG",
                                       "labels": {"a": 1}, "port": 1.5}}, SCHEMA)
    got = {(c.field, c.message) for c in causes}
    assert ("spec.replicas", "Invalid value: -1: spec.replicas in body should be greater than or equal to 0") in got
    assert ("spec.engine.kind", 'Unsupported value: "gpu": supported values: "sim", "personaplex"') in got
    assert {"spec.name", "spec.labels.a", "spec.port"} <= {c.field for c in causes}
    assert [c.field for c in schema.validate({"spec": {}}, SCHEMA)] == ["spec.engine"]


def test_a_valid_object_has_no_causes() -> None:
    assert schema.validate({"spec": {"replicas": 0, "engine": {"kind": "sim"}, "port": "http"}}, SCHEMA) == []


def test_metadata_is_never_pruned_even_where_the_schema_declares_it() -> None:
    """The LiveEngine CRD declares `metadata: {type: object}` (no properties), as controller-gen does."""
    declared = {**SCHEMA, "properties": {**SCHEMA["properties"], "metadata": {"type": "object"}}}
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}}
    pruned, dropped = schema.prune(obj, declared)
    assert pruned["metadata"] == {"name": "n", "labels": {"a": "b"}} and dropped == []
