"""Patch application: RFC 7386 and RFC 6902 by their examples, the strategic merge approximation by kubectl's shapes."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.emulator.apiserver import errors, patch, storage

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=4),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                        max_size=3), max_leaves=10)
objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


def test_merge_patch_follows_the_rfc_7386_example() -> None:
    target = {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"}, "tags": ["example", "sample"],
              "content": "This will be unchanged"}
    body = {"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": None}, "tags": ["example"]}
    assert patch.merge_patch(target, body) == {
        "title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"], "content": "This will be unchanged",
        "phoneNumber": "+01-123-456-7890"}


@given(objects, objects)
def test_merge_patch_never_mutates_and_is_idempotent(target: dict, body: dict) -> None:
    before = copy.deepcopy((target, body))
    once = patch.merge_patch(target, body)
    assert (target, body) == before
    assert patch.merge_patch(once, body) == once


def test_json_patch_applies_every_operation() -> None:
    doc = {"a": {"b": [1, 2, 3]}, "c": "x"}
    ops = [{"op": "add", "path": "/a/b/1", "value": 9}, {"op": "remove", "path": "/a/b/0"},
           {"op": "replace", "path": "/c", "value": "y"}, {"op": "copy", "from": "/c", "path": "/d"},
           {"op": "move", "from": "/d", "path": "/e~1f"}, {"op": "add", "path": "/a/b/-", "value": 4},
           {"op": "test", "path": "/a/b", "value": [9, 2, 3, 4]}]
    assert patch.json_patch(doc, ops) == {"a": {"b": [9, 2, 3, 4]}, "c": "y", "e/f": "y"}


def test_a_failed_json_patch_test_is_422_and_changes_nothing() -> None:
    doc = {"metadata": {"finalizers": ["a"]}}
    with pytest.raises(errors.ApiError) as caught:
        patch.json_patch(doc, [{"op": "remove", "path": "/metadata/finalizers/0"},
                               {"op": "test", "path": "/metadata/finalizers", "value": ["a"]}])
    assert caught.value.code == 422
    assert doc == {"metadata": {"finalizers": ["a"]}}


def test_json_patch_on_a_missing_path_is_422() -> None:
    with pytest.raises(errors.ApiError) as caught:
        patch.json_patch({}, [{"op": "replace", "path": "/spec/replicas", "value": 1}])
    assert caught.value.code == 422


@pytest.mark.parametrize(("content_type", "body"), [
    (storage.JSON_PATCH, [{"op": "replace", "path": "", "value": [1]}]),
    (storage.STRATEGIC, {"$patch": "delete"}),
])
def test_a_patch_that_leaves_no_object_to_store_is_422(content_type: str, body: object) -> None:
    """Both are valid patches whose result is not an object: the client's error, not the store's."""
    with pytest.raises(errors.ApiError) as caught:
        storage.apply_patch(None, {"metadata": {"name": "a"}}, content_type, body)
    assert caught.value.code == 422 and "no JSON object" in caught.value.message


def test_strategic_merge_merges_containers_by_name_and_env_by_name() -> None:
    current = {"spec": {"containers": [{"name": "a", "image": "x:1", "env": [{"name": "K", "value": "1"}]},
                                       {"name": "b", "image": "y:1"}]}}
    body = {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                     "containers": [{"name": "a", "env": [{"name": "L", "value": "2"}]}]}}
    out = patch.strategic_merge_patch(current, body)
    assert [c["name"] for c in out["spec"]["containers"]] == ["b", "a"]
    assert out["spec"]["containers"][1] == {"name": "a", "image": "x:1",
                                            "env": [{"name": "K", "value": "1"}, {"name": "L", "value": "2"}]}


def test_strategic_merge_honours_delete_replace_and_retain_keys() -> None:
    current = {"spec": {"containers": [{"name": "a"}, {"name": "b"}], "strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}, "args": ["x", "y"]}}
    body = {"spec": {"containers": [{"name": "b", "$patch": "delete"}],
                     "strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None},
                     "args": ["z"]}}
    assert patch.strategic_merge_patch(current, body) == {
        "spec": {"containers": [{"name": "a"}], "strategy": {"type": "Recreate"}, "args": ["z"]}}


def test_strategic_merge_treats_finalizers_as_a_set() -> None:
    out = patch.strategic_merge_patch({"metadata": {"finalizers": ["a"]}},
                                      {"metadata": {"finalizers": ["a", "b"],
                                                    "$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out == {"metadata": {"finalizers": ["b"]}}
