"""`bodies`: what a request body must be before any handler reads it (pure)."""

from __future__ import annotations

import pytest

from liveplex.emulator.apiserver import bodies, errors


def _nested(depth: int) -> object:
    value: object = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_nesting_is_refused_past_the_limit_and_checked_without_recursion() -> None:
    bodies.check(_nested(bodies.MAX_DEPTH))
    with pytest.raises(errors.ApiError) as exc:
        bodies.check(_nested(bodies.MAX_DEPTH + 1))
    assert exc.value.code == 400 and f"deeper than {bodies.MAX_DEPTH}" in exc.value.message
    deep: list = []
    for _ in range(100_000):  # far past Python's recursion limit
        deep = [deep]
    with pytest.raises(errors.ApiError):
        bodies.check(deep)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2 ** 64, -(2 ** 63) - 1, {1: "a"}, b"x", "\ud800",
                                   {"\udc00": "a"}, {"a": [{"b": float("-inf")}]}])
def test_values_no_json_decoder_yields_are_refused(value: object) -> None:
    """Only YAML can produce them (orjson refuses them in JSON text), so only YAML bodies are walked for them."""
    with pytest.raises(errors.ApiError) as exc:
        bodies.check(value, values=True)
    assert exc.value.code == 400
    bodies.check(value)


def test_a_refusal_names_where() -> None:
    with pytest.raises(errors.ApiError) as exc:
        bodies.check({"metadata": {"annotations": {"a": "\ud800"}}, "b": [0, {1: 2}]}, values=True)
    assert exc.value.message.startswith(("metadata.annotations.a:", "b[1]:"))
    with pytest.raises(errors.ApiError) as exc:
        bodies.check({"spec": [_nested(bodies.MAX_DEPTH)]})
    assert "(at spec[0]" in exc.value.message


def test_yaml_is_read_as_sigs_k8s_io_yaml_hands_it_to_the_json_decoder() -> None:
    parsed = bodies.parse(b"a: 2020-01-01\n1: x\ntrue: y\nb: [1, 2.5, null, 'z']\n", bodies.YAML)
    assert parsed == {"a": "2020-01-01", "1": "x", "true": "y", "b": [1, 2.5, None, "z"]}


@pytest.mark.parametrize("text", [
    b"a: &x [1]\nb: *x\n", b"a: 1\n---\nb: 2\n", b"{? [a] : b}\n", b"~: a\n", b"a: !!binary aGk=\n",
    b"a: " + b"[" * 200 + b"]" * 200, b"a: '\\xff'\n\xff",
])
def test_yaml_aliases_documents_odd_keys_and_depth_are_refused(text: bytes) -> None:
    with pytest.raises(errors.ApiError) as exc:
        bodies.parse(text, bodies.YAML)
    assert exc.value.code == 400


def test_json_is_not_read_as_yaml_and_the_size_limit_is_3_mib() -> None:
    with pytest.raises(errors.ApiError) as exc:
        bodies.parse(b"a: b", bodies.JSON)
    assert exc.value.code == 400
    with pytest.raises(errors.ApiError) as exc:
        bodies.parse(b" " * (bodies.MAX_BYTES + 1), bodies.JSON)
    assert (exc.value.code, exc.value.reason) == (413, "RequestEntityTooLarge")
    assert bodies.parse(b"", bodies.JSON) == {}
    assert bodies.media_type("Application/JSON; charset=utf-8") == bodies.JSON
    assert bodies.media_type("") == bodies.JSON
