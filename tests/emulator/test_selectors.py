"""Label and field selectors: the query grammar, matching, and the string form of a LabelSelector."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.emulator.apiserver import errors, kinds, selectors

POD = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "front"}},
       "status": {"phase": "Running"}}


@pytest.mark.parametrize(("text", "matched"), [
    ("", True), ("app=web", True), ("app==web", True), ("app!=web", False), ("app in (web,api)", True),
    ("tier notin (front)", False), ("app", True), ("!canary", True), ("!app", False),
    ("app=web,tier in (back)", False), ("missing!=x", True),
])
def test_label_selector_grammar(text: str, matched: bool) -> None:
    assert selectors.matches_labels(selectors.parse_labels(text), POD) is matched


def test_a_malformed_label_selector_is_400() -> None:
    with pytest.raises(errors.ApiError) as caught:
        selectors.parse_labels("app in web")
    assert caught.value.code == 400


@pytest.mark.parametrize(("text", "matched"), [
    ("metadata.name=p", True), ("metadata.namespace!=ns", False), ("status.phase==Running", True),
    ("metadata.name=q", False),
])
def test_field_selectors(text: str, matched: bool) -> None:
    assert selectors.matches_fields(selectors.parse_fields(text), POD) is matched


@pytest.mark.parametrize(("labels", "text", "refusal"), [
    (None, "data.k=v", '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    ({"metadata.name": "metadata.name"}, "metadata.namespace=ns", "field label not supported: metadata.namespace"),
])
def test_a_field_label_the_kind_does_not_take_is_400_in_its_conversion_s_words(
        labels: dict[str, str] | None, text: str, refusal: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        selectors.convert_fields(selectors.parse_fields(text), labels)
    assert (caught.value.code, caught.value.message) == (400, refusal)


def test_a_field_label_selects_the_path_its_kind_maps_it_to() -> None:
    pods = kinds.Registry().by_key(kinds.POD_KEY).field_labels
    converted = selectors.convert_fields(selectors.parse_fields("spec.host=n,metadata.name=p"), pods)
    assert selectors.matches_fields(converted, {**POD, "spec": {"nodeName": "n"}})
    assert selectors.convert_fields(selectors.parse_fields("metadata.namespace=ns"), None)


keys = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)


@given(st.dictionaries(keys, keys, max_size=4), st.lists(st.tuples(keys, st.sampled_from(["In", "NotIn", "Exists"]),
                                                                   st.lists(keys, min_size=1, max_size=2)),
                                                         max_size=2))
def test_rendering_a_label_selector_parses_back_to_the_same_requirements(labels: dict, exprs: list) -> None:
    selector = {"matchLabels": labels,
                "matchExpressions": [{"key": k, "operator": op, "values": v if op != "Exists" else []}
                                     for k, op, v in exprs]}
    requirements = selectors.from_label_selector(selector)
    assert selectors.parse_labels(selectors.render(requirements)) == requirements
