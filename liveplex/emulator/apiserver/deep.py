"""JSON values of any depth: parsed, serialized, copied and compared without recursion.

Development emulator, not for production. Pure. kube-apiserver takes objects nested up to 10,000
levels (`bodies.MAX_DEPTH`, Go's encoding/json limit) and walks them on goroutine stacks that grow
as needed. Python stops near 1,000 frames, orjson parses 1,024 levels and writes 254, and `==`,
`copy.deepcopy` and `json` recurse. So every walk over a whole stored value is iterative here:
`loads` and `dumps` keep orjson's speed for what it takes and fall back to a loop for what it
cannot, `clone` and `equal` replace `copy.deepcopy` and `==`, and `run` drives a walker written as
a recursive generator on a heap stack (each recursive call is a `yield`). The other walkers
follow a CRD's schema, whose depth `crds.py` bounds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator
from typing import Any, TypeVar

import orjson

T = TypeVar("T")
Walk = Generator[Any, Any, T]
"""A recursive walker for `run`: it yields the walks of its children and is sent their results."""

_INT64_MIN, _UINT64_END = -(2 ** 63), 2 ** 64
"""The integers orjson (and so `loads`) keeps as integers; others become floats, as orjson makes them."""


def run(walk: Walk[T]) -> T:
    """The result of `walk`, its recursion unrolled onto a list: a walker of any depth costs no stack.
    An exception a child raises is thrown into its parent, as a recursive call would raise it there."""
    stack: list[Walk[Any]] = [walk]
    sent: Any = None
    error: Exception | None = None
    while True:
        try:
            child = stack[-1].throw(error) if error is not None else stack[-1].send(sent)
        except StopIteration as done:
            stack.pop()
            sent, error = done.value, None
            if not stack:
                return sent
            continue
        except Exception as exc:  # noqa: BLE001 - handed to the parent walker, or raised from the root
            stack.pop()
            if not stack:
                raise
            sent, error = None, exc
            continue
        stack.append(child)
        sent, error = None, None


def clone(value: T) -> T:
    """A deep copy of a JSON value (`copy.deepcopy` recurses, and is slower)."""
    if not isinstance(value, dict | list):
        return value
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, top, 0)]
    while stack:
        node, parent, key = stack.pop()
        copied: Any = {} if isinstance(node, dict) else [None] * len(node)
        parent[key] = copied
        for sub_key, sub in node.items() if isinstance(node, dict) else enumerate(node):
            copied[sub_key] = sub
            if isinstance(sub, dict | list):
                stack.append((sub, copied, sub_key))
    return top[0]


def equal(a: object, b: object) -> bool:
    """JSON equality: `==` without recursion, and `true` is not `1` (the bytes upstream compares differ)."""
    stack: list[tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, dict):
            if not isinstance(y, dict) or len(x) != len(y) or x.keys() != y.keys():
                return False
            stack.extend((v, y[k]) for k, v in x.items())
        elif isinstance(x, list):
            if not isinstance(y, list) or len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(y, dict | list) or isinstance(x, bool) != isinstance(y, bool) or x != y:
            return False
    return True


def contains(items: list, value: object) -> bool:
    """`value in items` by `equal`."""
    return any(equal(item, value) for item in items)


# --- serializing ----------------------------------------------------------------------------------

def _too_deep(exc: Exception) -> bool:
    return "Recursion limit" in str(exc)


class _Chunk(bytes):
    """Text `dumps` has already written (a value is never `bytes`, but this cannot be mistaken for one)."""


def dumps(value: object, sort_keys: bool = False) -> bytes:
    """`orjson.dumps`, for values nested deeper than its 254 levels too (parts within them still go
    through orjson)."""
    option = orjson.OPT_SORT_KEYS if sort_keys else None
    out: list[bytes] = []
    stack: list[object] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, _Chunk):
            out.append(node)
            continue
        try:
            out.append(orjson.dumps(node, option=option))
            continue
        except orjson.JSONEncodeError as exc:
            if not _too_deep(exc):
                raise
        parts: list[object] = []
        if isinstance(node, dict):
            items = sorted(node.items()) if sort_keys else node.items()
            for n, (key, sub) in enumerate(items):
                parts += [_Chunk(b"," if n else b""), _Chunk(orjson.dumps(key) + b":"), sub]
            stack += [_Chunk(b"}"), *reversed(parts), _Chunk(b"{")]
        else:
            assert isinstance(node, list | tuple)  # orjson refused nothing else for its depth
            for n, sub in enumerate(node):
                parts += [_Chunk(b"," if n else b""), sub]
            stack += [_Chunk(b"]"), *reversed(parts), _Chunk(b"[")]
    return b"".join(out)


# --- parsing --------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""[ \t\n\r]*(?:([\[\]{},:])|"((?:[^"\\\x00-\x1f]|\\[^\x00-\x1f])*)"|"""
                    r"""(-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)|(true|false|null))""")
_LITERALS = {"true": True, "false": False, "null": None}
_END = re.compile(r"[ \t\n\r]*")


def _string(text: str, escaped: str) -> str:
    if "\\" not in escaped:
        return escaped
    value = json.loads(f'"{escaped}"')
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise json.JSONDecodeError("no low surrogate in string", text, 0) from None
    return value


def _number(text: str, digits: str, fraction: str | None, exponent: str | None, at: int) -> int | float:
    if fraction is None and exponent is None and _INT64_MIN <= (whole := int(digits)) < _UINT64_END:
        return whole
    number = float(digits)
    if number in (float("inf"), float("-inf")):
        raise json.JSONDecodeError("number is infinity when parsed as double", text, at)
    return number


def parse(raw: bytes, found: Callable[[list[object]], None] | None = None) -> object:
    """`raw` as `orjson.loads` reads it (the same values, the same text refused), iteratively; `found`
    is called with the path (keys and indices) of every key an object repeats, as a strict decoder
    reports them. Raises `json.JSONDecodeError`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(f"str is not valid UTF-8: {exc.reason}", "", exc.start) from None
    open_: list[dict | list] = []
    keys: list[object] = []
    """Per open container: the key its next value goes under (objects) or the next index (lists)."""
    expect, pos, value = "value", 0, None
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise json.JSONDecodeError("unexpected character", text, pos)
        pos = match.end()
        punct, string, digits, fraction, exponent, literal = match.groups()
        top = open_[-1] if open_ else None
        if punct == ":" and expect == "colon":
            expect = "value"
            continue
        if punct == "," and expect == "comma":
            expect = "key" if isinstance(top, dict) else "value"
            continue
        if punct in ("}", "]") and expect in ("comma", "first key", "first value") \
                and isinstance(top, dict) == (punct == "}"):
            value = open_.pop()
            keys.pop()
        elif string is not None and expect in ("key", "first key"):
            assert isinstance(top, dict)  # keys are expected inside objects only
            key = _string(text, string)
            if found is not None and key in top:
                found([*keys[:-1], key])
            keys[-1] = key
            expect = "colon"
            continue
        elif expect in ("value", "first value") and punct in ("{", "["):
            open_.append({} if punct == "{" else [])
            keys.append(0)
            expect = "first key" if punct == "{" else "first value"
            continue
        elif expect in ("value", "first value") and punct is None:
            value = (_string(text, string) if string is not None else _LITERALS[literal] if literal is not None
                     else _number(text, digits, fraction, exponent, match.start()))
        else:
            raise json.JSONDecodeError(f"unexpected {match.group().strip()!r}", text, match.start())
        if not open_:
            if _END.fullmatch(text, pos) is None:
                raise json.JSONDecodeError("trailing characters", text, pos)
            return value
        parent = open_[-1]
        if isinstance(parent, dict):
            parent[keys[-1]] = value
        else:
            parent.append(value)
            keys[-1] = len(parent)
        expect = "comma"


def _depth_refused(exc: orjson.JSONDecodeError) -> bool:
    return str(exc).startswith("depth limit exceeded")


def loads(raw: bytes) -> object:
    """`orjson.loads`, for values nested deeper than its 1,024 levels too."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not _depth_refused(exc):
            raise
    return parse(raw)


def path(keys: list[object]) -> str:
    """Keys and indices as the Go decoder names a field: `spec.containers[0].name`."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
