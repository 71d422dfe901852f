"""`deep`: JSON values of any depth parsed, written, copied and compared without recursion (pure)."""

from __future__ import annotations

import json
import random

import orjson
import pytest

from liveplex.emulator.apiserver import deep


def _value(rnd: random.Random, depth: int = 0) -> object:
    if depth > 4 or rnd.random() < 0.3:
        return rnd.choice([0, -1, 2 ** 63 - 1, 2 ** 64 - 1, 1.5, 1e300, True, False, None, "", "é\u2028\"\\\n", "😀"])
    if rnd.random() < 0.5:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {rnd.choice("abcde"): _value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))}


def test_parse_reads_what_orjson_reads_and_dumps_writes_what_it_writes() -> None:
    rnd = random.Random(46)
    for _ in range(500):
        value = _value(rnd)
        text = json.dumps(value, ensure_ascii=rnd.random() < 0.5, indent=rnd.choice([None, 1])).encode()
        parsed = deep.parse(text)
        assert deep.equal(parsed, orjson.loads(text)) and json.dumps(parsed) == json.dumps(orjson.loads(text))
        assert deep.dumps(value) == orjson.dumps(value)
        assert deep.clone(value) == value and deep.equal(deep.clone(value), value)


@pytest.mark.parametrize("text", [
    b"", b"[1,]", b"01", b'{"a"}', b'{"a":}', b"{,}", b"]", b'{"a":1,}', b'"\t"', b'"\\ud800"', b"\xef\xbb\xbf{}",
    b"1e400", b"[1 2]", b"truex", b"{1:2}", b'"\\x"', b"\xff", b"{}}", b"[}", b"{]", b"1.", b"+1", b"[1]x"])
def test_parse_refuses_what_orjson_refuses(text: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(text)
    with pytest.raises(json.JSONDecodeError):
        deep.parse(text)


def test_ten_thousand_levels_cost_no_stack() -> None:
    text = b'{"a":' * 10_000 + b"[1]" + b"}" * 10_000
    value = deep.loads(text)  # past orjson's 1,024 levels
    assert deep.dumps(value) == text and deep.dumps(value, sort_keys=True) == text  # past its 254
    assert deep.equal(deep.clone(value), value) and not deep.equal(value, deep.loads(text.replace(b"1", b"2")))


def test_parse_reports_each_repeated_key_where_a_strict_decoder_does() -> None:
    found: list[str] = []
    deep.parse(b'{"a":{"b":1,"b":2},"a":[{"c":1,"\\u0063":2}]}', lambda keys: found.append(deep.path(keys)))
    assert found == ["a.b", "a", "a[0].c"]


def test_equal_is_json_equality() -> None:
    assert not deep.equal({"a": True}, {"a": 1}) and not deep.equal([0], [False])
    assert deep.equal({"a": 1, "b": [1.0]}, {"b": [1], "a": 1}) and not deep.equal({"a": 1}, {"b": 1})
    assert deep.contains([{"a": [1]}], {"a": [1]}) and not deep.contains([1], True)


def test_run_unrolls_a_recursive_walker_and_raises_where_it_would() -> None:
    def depth(node: object) -> deep.Walk[int]:
        if isinstance(node, ValueError):
            raise node
        if not isinstance(node, list):
            return 0
        return 1 + ((yield depth(node[0])) if node else 0)

    nested: object = []
    for _ in range(50_000):
        nested = [nested]
    assert deep.run(depth([[[]]])) == 3 and deep.run(depth(nested)) == 50_001
    with pytest.raises(ValueError, match="deep"):
        deep.run(depth([[ValueError("deep")]]))
