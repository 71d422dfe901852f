"""CRD rules evaluated by the emulator's CEL layer, as pure functions (the HTTP contract is test_crd_admission.py)."""

from __future__ import annotations

import pytest

from liveplex.emulator.apiserver import cel

SCHEMA = {"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.n == oldSelf.n", "message": "n is immutable"},
                                 {"rule": "self.n < 5", "message": "n must be under 5"}],
    "properties": {"n": {"type": "integer"}, "items": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
        "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
                  "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "v may only grow"}]}}}}}}


def _messages(new: dict, old: object = cel.MISSING) -> list[str]:
    return [f"{c.field}: {c.message}" for c in cel.validate(new, SCHEMA, old)]


def test_transition_rules_run_only_against_an_old_value() -> None:
    assert _messages({"spec": {"n": 1}}) == []
    assert _messages({"spec": {"n": 2}}, {"spec": {"n": 1}}) == ['spec: Invalid value: "object": n is immutable']


def test_an_unchanged_value_is_not_validated_again() -> None:
    old = {"spec": {"n": 7}, "status": {"x": 1}}
    assert _messages({"spec": {"n": 7}, "status": {"x": 2}}, old) == []
    assert _messages({"spec": {"n": 7}}) == ['spec: Invalid value: "object": n must be under 5']


def test_map_list_items_are_correlated_by_their_keys() -> None:
    old = {"spec": {"n": 1, "items": [{"k": "a", "v": 2}, {"k": "b", "v": 2}]}}
    new = {"spec": {"n": 1, "items": [{"k": "b", "v": 1}, {"k": "a", "v": 3}, {"k": "c", "v": 0}]}}
    assert _messages(new, old) == ['spec.items[0]: Invalid value: "object": v may only grow']


@pytest.mark.parametrize(("rule", "holds"), [
    ("self.s.lowerAscii() == 'ab'", True), ("self.s.upperAscii() == 'AB'", True),
    ("self.s.split('B') == ['a', '']", True), ("['x', 'y'].join('-') == 'x-y'", True),
    ("self.s.indexOf('B') == 1", True), ("[1, 2].isSorted() && [3, 1].sum() == 4", True),
    ("self.s.find('[a-z]') == 'a'", True), ("[1, 5].max() == 1", False)])
def test_the_kubernetes_extensions(rule: str, holds: bool) -> None:
    result = cel.compile_rule(rule).runner.evaluate({"self": cel.celpy.json_to_cel({"s": "aB"})})
    assert bool(result) is holds


@pytest.mark.parametrize("rule", ["self.a.noSuchFunction()", "self.a +", "nope(self)"])
def test_rules_that_do_not_compile_are_reported_at_their_path(rule: str) -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-validations": [
        {"rule": rule}]}}}
    [cause] = cel.rule_errors(schema, "root")
    assert cause.field == "root.properties[spec].x-kubernetes-validations[0].rule"
    assert "compilation failed" in cause.message
