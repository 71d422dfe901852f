"""Defaults and structural checks agree with the CRD read as JSON Schema; invalid examples name the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.operator import crd, schema, spec
from tests.operator import kubeschemas, objects

INVALID = sorted((Path(__file__).parent / "invalid").glob("*.yaml"))
_VALIDATOR = kubeschemas.validator(crd.object_schema())


def _refused_at(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# refused at: "), path
    return first.removeprefix("# refused at: ")


@pytest.mark.parametrize("name", ["sim", "personaplex", "personaplex-fetch"])
def test_examples_validate_against_the_crds_own_schema(name: str) -> None:
    raw = objects.example(name)
    _VALIDATOR.validate(raw)
    _VALIDATOR.validate(spec.defaulted(raw))
    assert spec.parse(raw).name == raw["metadata"]["name"]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_examples_are_refused_naming_the_field(path: Path) -> None:
    with pytest.raises(spec.SpecError) as caught:
        spec.parse(yaml.safe_load(path.read_text()))
    assert caught.value.paths == (_refused_at(path),)
    assert _refused_at(path) in str(caught.value)


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_structural_refusals_match_json_schema_and_rule_refusals_are_cel_only(path: Path) -> None:
    obj = spec.defaulted(yaml.safe_load(path.read_text()))
    structural = schema.check(crd.object_schema(), obj)
    errors = list(_VALIDATOR.iter_errors(obj))
    assert bool(structural) == bool(errors)
    if not structural:
        assert [i.code for i in schema.rule_issues(obj)] == ["rule"]


def test_defaults_fill_absent_fields_recursively_without_changing_the_input() -> None:
    raw = objects.liveengine({"engine": {"kind": "sim", "sim": {}}, "model": {"name": "m"}})
    before = copy.deepcopy(raw)
    s = spec.defaulted(raw)["spec"]
    assert raw == before
    assert s["replicas"] == 1 and s["drain"] == {"gracePeriodSeconds": 600}
    assert s["continuity"] == {"reattachGraceSeconds": 15}
    assert s["pause"] == {"idleSeconds": 0, "vadThresholdPercent": 50, "wakeReserve": 2, "maxPaused": 256,
                          "hostBudgetGiB": 0}
    assert s["capacity"] == {"maxSessions": 32, "maxSeconds": 240, "jitterFrames": 4, "prebufferFrames": 0,
                             "latenessBudgetMillis": 20}
    assert s["engine"]["sim"] == {"tickBaseMicros": 0, "tickPerSessionMicros": 0, "echoFrames": 6}
    assert s["model"] == {"name": "m", "servedModels": ["gpt-live-1", "gpt-live-1.1"], "dtype": "bf16",
                          "prefillBudgetMillis": 0}
    assert "autoscaling" not in s and "resources" not in s


def test_given_values_are_kept() -> None:
    s = spec.defaulted(objects.liveengine(objects.sim_spec(replicas=0, capacity={"maxSessions": 3})))["spec"]
    assert s["replicas"] == 0 and s["capacity"]["maxSessions"] == 3 and s["capacity"]["jitterFrames"] == 4


def test_a_spec_error_lists_every_field() -> None:
    body = objects.liveengine({"engine": {"kind": "sim"}, "replicas": -1, "capacity": {"maxSeconds": "long"}})
    with pytest.raises(spec.SpecError) as caught:
        spec.parse(body)
    assert set(caught.value.paths) == {"spec.replicas", "spec.capacity.maxSeconds"}


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [path] + [p for k, v in node.items() for p in _leaves(v, (*path, k))]
    if isinstance(node, list):
        return [path] + [p for i, v in enumerate(node) for p in _leaves(v, (*path, i))]
    return [path]


_BASE = spec.defaulted(objects.example("personaplex"))
_PATHS = [p for p in _leaves(_BASE["spec"], ("spec",)) if p]
_VALUES = st.sampled_from([-1, 0, 1, 2, 70, 10**6, True, "", "x", "8", "64Gi", "../x", "/abs", "bf16", "sim",
                           "Exists", {}, [], ["gpt-live-1"], {"bogus": 1}, [{"name": "X"}]])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_PATHS), st.sampled_from(["set", "delete", "add"]), _VALUES)
def test_the_checker_agrees_with_json_schema_on_mutated_objects(path: tuple[Any, ...], how: str, value: Any) -> None:
    obj = copy.deepcopy(_BASE)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent[last], dict):
        parent[last]["bogusField"] = value
    else:
        parent[last] = value
    assert bool(schema.check(crd.object_schema(), obj)) == (not _VALIDATOR.is_valid(obj)), (path, how, value)
