"""Each CEL rule's text (run by cel-python) and its Python twin agree, and each rule can refuse."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.operator import cel, names, spec
from tests.operator import objects

_ENV = celpy.Environment()
_PROGRAMS = {rule.rule: _ENV.program(_ENV.compile(rule.rule)) for rule in cel.RULES}


def cel_holds(rule: cel.Rule, node: Any) -> bool:
    """What an API server would decide: the rule text evaluated with `self` = the node."""
    result = _PROGRAMS[rule.rule].evaluate({"self": celpy.json_to_cel(node)})
    assert isinstance(result, celpy.celtypes.BoolType), f"{rule.rule} did not evaluate to a bool: {result!r}"
    return bool(result)


def node_at(obj: dict[str, Any], at: tuple[str, ...]) -> Any:
    for key in at:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


_sources = st.lists(st.sampled_from([("pvc", {"claimName": "w", "path": "p"}), ("hostPath", {"path": "/w"}),
                                     ("image", {"reference": "r", "path": ""})]), unique_by=lambda s: s[0],
                    max_size=3).map(dict)
_models = st.fixed_dictionaries(
    {"name": st.just("m"), "servedModels": st.just(["gpt-live-1"]), "dtype": st.sampled_from(["bf16", "fp32"])},
    optional={"kvDtype": st.sampled_from(["bf16", "fp32", "fp8"]), "source": _sources})
_specs = st.fixed_dictionaries(
    {"engine": st.fixed_dictionaries({"kind": st.sampled_from(["sim", "personaplex"])},
                                     optional={"sim": st.just({"tickBaseMicros": 0, "tickPerSessionMicros": 0,
                                                               "echoFrames": 6})}),
     "capacity": st.fixed_dictionaries({"jitterFrames": st.integers(1, 6), "prebufferFrames": st.integers(1, 6)})},
    optional={
        "model": _models,
        "resources": st.fixed_dictionaries({}, optional={"gpus": st.integers(0, 1)}),
        "autoscaling": st.fixed_dictionaries({"minReplicas": st.integers(1, 4), "maxReplicas": st.integers(1, 4)}),
        "pacing": st.fixed_dictionaries({"leadMillis": st.integers(0, 79), "spreadMillis": st.integers(0, 79)}),
        "placement": st.fixed_dictionaries({}, optional={"subPools": st.integers(1, 3)}),
        "pause": st.fixed_dictionaries({"idleSeconds": st.integers(0, 2), "maxPaused": st.integers(0, 2)}),
        "pod": st.fixed_dictionaries({}, optional={
            "labels": st.dictionaries(st.sampled_from([*names.SELECTOR_KEYS, "team", "tier"]), st.just("x")),
            "env": st.lists(st.sampled_from([*names.RESERVED_ENV, "HF_HOME", "TZ"]).map(lambda n: {"name": n}),
                            max_size=3)}),
    })
_objects = st.builds(lambda name, s: {"metadata": {"name": name}, "spec": s},
                     st.sampled_from(["pp", "a", "ok-1", "Bad", "9lives", "-x", "x" * 63, "x" * 64]), _specs)


@settings(max_examples=300, deadline=None)
@given(_objects)
def test_every_rule_text_and_its_python_twin_agree(obj: dict[str, Any]) -> None:
    for rule in cel.RULES:
        node = node_at(obj, rule.at)
        if node is not None:
            assert cel_holds(rule, node) == rule.holds(node), (rule.rule, node)


def _refused(rule: cel.Rule) -> dict[str, Any]:
    """A LiveEngine that only `rule` refuses."""
    by_blame: dict[str, dict[str, Any]] = {
        "spec.model is required": objects.liveengine({"engine": {"kind": "personaplex"}}),
        "spec.model.source is required": objects.liveengine(
            {"engine": {"kind": "personaplex"}, "model": {"name": "m"}}),
        "spec.model.source is only": objects.liveengine(
            objects.sim_spec(model={"name": "m", "source": {"hostPath": {"path": "/w"}}})),
        "spec.resources.gpus must be 0": objects.liveengine(objects.sim_spec(resources={"gpus": 1})),
        "spec.resources.gpus must be 1": objects.liveengine(objects.personaplex_spec(resources={"gpus": 0})),
        "spec.placement.subPools": objects.liveengine({"engine": {"kind": "sim"}, "placement": {"subPools": 2}}),
        "spec.engine.sim is allowed": objects.liveengine(
            objects.personaplex_spec(engine={"kind": "personaplex", "sim": {}})),
        "spec.model.kvDtype": objects.liveengine(
            objects.sim_spec(model={"name": "m", "dtype": "bf16", "kvDtype": "fp32"})),
        "spec.model.source must set": objects.liveengine(objects.personaplex_spec(model={
            "name": "m", "source": {"pvc": {"claimName": "w"}, "hostPath": {"path": "/w"}}})),
        "spec.capacity.prebufferFrames": objects.liveengine(
            objects.sim_spec(capacity={"jitterFrames": 2, "prebufferFrames": 3})),
        "spec.pacing.leadMillis": objects.liveengine(
            objects.sim_spec(pacing={"leadMillis": 60, "spreadMillis": 20})),
        "spec.pause.maxPaused": objects.liveengine(objects.sim_spec(pause={"idleSeconds": 3, "maxPaused": 0})),
        "spec.autoscaling.minReplicas": objects.liveengine(
            objects.sim_spec(autoscaling={"minReplicas": 3, "maxReplicas": 2})),
        "spec.pod.labels": objects.liveengine(objects.sim_spec(pod={"labels": {names.INSTANCE_LABEL: "other"}})),
        "spec.pod.env": objects.liveengine(objects.sim_spec(pod={"env": [{"name": names.POD_IP_ENV, "value": "x"}]})),
        "metadata.name": objects.liveengine(name="Not_A_Label"),
    }
    matches = [body for prefix, body in by_blame.items() if rule.message.startswith(prefix)]
    assert len(matches) == 1, rule.message
    return matches[0]


@pytest.mark.parametrize("rule", cel.RULES, ids=lambda r: ".".join(r.blames))
def test_each_rule_refuses_its_example_naming_the_field(rule: cel.Rule) -> None:
    body = _refused(rule)
    with pytest.raises(spec.SpecError) as caught:
        spec.parse(body)
    assert [(i.path, i.message) for i in caught.value.issues] == [(rule.blames, rule.message)]
    assert not cel_holds(rule, node_at(spec.defaulted(body), rule.at))


def test_the_examples_pass_every_rule_in_both_languages() -> None:
    for name in ("sim", "personaplex", "personaplex-fetch"):
        obj = spec.defaulted(objects.example(name))
        for rule in cel.RULES:
            node = node_at(obj, rule.at)
            if node is not None:
                assert cel_holds(rule, node) and rule.holds(node), (name, rule.rule)
