"""`bodies`: what a request body must be before any handler reads it (pure)."""

from __future__ import annotations

import pytest

from liveplex.emulator.apiserver import bodies, deep, errors


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
    b"a: " + b"[" * bodies.MAX_DEPTH + b"]" * bodies.MAX_DEPTH, b"a: '\\xff'\n\xff", b"a: !!set {b}\n",
    b"<<: [a]\n", b"a: !!timestamp 2020-01-01\n",
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


def test_yaml_nests_as_deep_as_json_in_linear_time() -> None:
    """PyYAML's own scanner is quadratic in open flow sequences (13 s for 10,000); the emulator's is not."""
    lists = bodies.MAX_DEPTH - 1
    value = bodies.parse(b"a: " + b"[" * lists + b"]" * lists, bodies.YAML)
    assert deep.dumps(value) == b'{"a":' + b"[" * lists + b"]" * lists + b"}"


def test_yaml_merge_keys_fill_in_what_a_mapping_does_not_set() -> None:
    assert bodies.parse(b"a: 1\n<<: [{a: 2, b: 2}, {b: 3, c: 3}]\n", bodies.YAML) == {"a": 1, "b": 2, "c": 3}
    with pytest.raises(errors.ApiError):
        bodies.parse(b"<<: 5\n", bodies.YAML)


@pytest.mark.parametrize(("text", "media", "found"), [
    (b'{"a":1,"b":{"c":[{"d":1,"d":2}]},"a":2}', bodies.JSON, ('duplicate field "b.c[0].d"', 'duplicate field "a"')),
    (b'{"a":1,"b":2}', bodies.JSON, ()),
    (b"a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", bodies.YAML,
     ('yaml: unmarshal errors:\n  line 4: key "c" already set in map\n  line 5: key "a" already set in map',)),
    (b'{"a":1,"a":2}', bodies.YAML, ('yaml: unmarshal errors:\n  line 1: key "a" already set in map',)),
    (b"", bodies.JSON, ()),
])
def test_strict_errors_are_the_keys_an_object_repeats(text: bytes, media: str, found: tuple[str, ...]) -> None:
    """sigs.k8s.io/json's words for JSON, go-yaml's for YAML (which a JSON text sent as YAML gets too)."""
    assert bodies.strict_errors(text, media) == found
    assert bodies.parse(text, media) in ({}, {"a": 2, "b": {"c": [{"d": 2}]}}, {"a": 1, "b": 2},
                                         {"a": 3, "b": {"c": 2}}, {"a": 2})
