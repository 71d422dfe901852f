"""CRD validation rules (`x-kubernetes-validations`) evaluated as kube-apiserver does, with cel-python.

Development emulator, not for production. Pure. Each rule runs with `self` bound to its schema
node's value (and `oldSelf` to the stored value on updates, for transition rules); a rule that
names `oldSelf` runs only on an update where the old value exists, unless `optionalOldSelf`. An
update whose value at a node is unchanged does not run that node's rules again (upstream's
validation ratcheting, on by default since v1.30). Old values are correlated through object
properties, map values and `x-kubernetes-list-type: map` keys, as upstream does.

Besides standard CEL (`has`, `all`, `exists`, `size`, `matches`, ...) the Kubernetes string, list
and regex libraries are provided as far as `EXTENSIONS` lists; a rule that calls anything else does
not compile, so a CRD using it is refused at create rather than failing later. Not emulated: the
cost budget, `messageExpression` type checks beyond a string result, and the `quantity`, `url`,
`ip`, `cidr`, `format` and `authz` libraries.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import celpy
import lark
from celpy import celtypes, evaluation

from liveplex.emulator.apiserver import deep
from liveplex.emulator.apiserver.errors import Cause
from liveplex.emulator.apiserver.schema import subschemas

MISSING: Any = object()
"""No old value at this node (a create, or a value that cannot be correlated)."""


def _string(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: celtypes.StringType(fn(*args))


def _index(fn: Callable[[list, Any], int]) -> Callable[..., Any]:
    return lambda target, *args: celtypes.IntType(fn(target, *args))


def _list_index(target: list, item: Any, last: bool = False) -> int:
    hits = [n for n, v in enumerate(target) if v == item]
    return (hits[-1] if last else hits[0]) if hits else -1


EXTENSIONS: dict[str, Callable[..., Any]] = {
    # strings
    "lowerAscii": _string(lambda s: s.lower()),
    "upperAscii": _string(lambda s: s.upper()),
    "trim": _string(lambda s: s.strip()),
    "replace": _string(lambda s, old, new, n=-1: s.replace(old, new, int(n))),
    "split": lambda s, sep, n=-1: celtypes.ListType(
        [celtypes.StringType(p) for p in (s.split(sep) if int(n) < 0 else s.split(sep, max(int(n) - 1, 0)))]),
    "join": lambda items, sep="": celtypes.StringType(sep.join(items)),
    "substring": _string(lambda s, start, end=None: s[int(start):None if end is None else int(end)]),
    "indexOf": _index(lambda t, x: t.find(x) if isinstance(t, str) else _list_index(t, x)),
    "lastIndexOf": _index(lambda t, x: t.rfind(x) if isinstance(t, str) else _list_index(t, x, last=True)),
    # lists
    "isSorted": lambda items: celtypes.BoolType(list(items) == sorted(items)),
    "sum": lambda items: functools.reduce(lambda a, b: a + b, items, celtypes.IntType(0)),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
    # regex
    "find": _string(lambda s, pattern: (m.group(0) if (m := re.search(pattern, s)) else "")),
    "findAll": lambda s, pattern, n=-1: celtypes.ListType(
        [celtypes.StringType(m.group(0)) for m in list(re.finditer(pattern, s))[:None if int(n) < 0 else int(n)]]),
}
_MACROS = ("has", "all", "exists", "exists_one", "map", "filter")
_KNOWN = frozenset(evaluation.base_functions) | frozenset(EXTENSIONS) | frozenset(_MACROS)
_ENV = celpy.Environment()


class CompileError(ValueError):
    """A rule that kube-apiserver would not compile; the message says why."""


@dataclass(frozen=True, slots=True)
class Program:
    text: str
    runner: celpy.Runner
    uses_old_self: bool


def _calls(tree: lark.Tree) -> set[str]:
    out = set()
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            out.add(str(node.children[0]))
        elif node.data == "member_dot_arg":
            out.add(str(node.children[1]))
    return out


@functools.lru_cache(maxsize=1024)
def compile_rule(text: str) -> Program:
    """The rule compiled; CompileError for a syntax error or a function nobody provides."""
    try:
        tree = _ENV.compile(text)
    except Exception as exc:  # celpy raises parse errors of several types
        raise CompileError(f"compilation failed: {str(exc).splitlines()[0]}") from None
    unknown = sorted(_calls(tree) - _KNOWN)
    if unknown:
        raise CompileError(f"compilation failed: ERROR: <input>: undeclared reference to '{unknown[0]}'")
    uses_old = any(isinstance(t, lark.Token) and t.value == "oldSelf" for t in tree.scan_values(lambda _: True))
    return Program(text, _ENV.program(tree, functions=EXTENSIONS), uses_old)


_TYPE_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def _failure(path: str, value: object, rule: Mapping[str, Any], detail: str) -> Cause:
    field = path + rule.get("fieldPath", "") if path else rule.get("fieldPath", "").lstrip(".") or "<nil>"
    reason = rule.get("reason", "FieldValueInvalid")
    shown = _TYPE_NAMES.get(type(value), "object")
    body = {"FieldValueRequired": f"Required value: {detail}", "FieldValueForbidden": f"Forbidden: {detail}",
            "FieldValueDuplicate": f'Duplicate value: "{shown}"'}.get(reason, f'Invalid value: "{shown}": {detail}')
    return Cause(field, body, reason)


def _cel(document: object) -> celtypes.Value:
    """A stored object's part as CEL values: objects hold only JSON's types (bodies.py decodes them).
    celpy's `json_to_cel` recurses, and a rule's node may hold a subtree as deep as any body."""
    return deep.run(_to_cel(document))


def _to_cel(document: object) -> deep.Walk[celtypes.Value]:
    if isinstance(document, dict):
        converted = celtypes.MapType()
        for key, value in document.items():
            converted[celtypes.StringType(key)] = yield _to_cel(value)
        return converted
    if isinstance(document, list):
        items = celtypes.ListType()
        for value in document:
            items.append((yield _to_cel(value)))
        return items
    if isinstance(document, bool):
        return celtypes.BoolType(document)
    if isinstance(document, int):
        return celtypes.IntType(document)
    if isinstance(document, float):
        return celtypes.DoubleType(document)
    return None if document is None else celtypes.StringType(cast(str, document))


def _run(program: Program, value: object, old: object) -> object:
    context = {"self": _cel(value)}
    if old is not MISSING:
        context["oldSelf"] = _cel(old)
    return program.runner.evaluate(context)


def _check_rules(node: Mapping[str, Any], value: object, old: object, path: str) -> list[Cause]:
    out: list[Cause] = []
    for rule in node.get("x-kubernetes-validations") or ():
        try:
            program = compile_rule(rule["rule"])
        except CompileError as exc:
            out.append(_failure(path, value, rule, str(exc)))
            continue
        if program.uses_old_self and old is MISSING and not rule.get("optionalOldSelf"):
            continue
        try:
            result = _run(program, value, old)
        except Exception as exc:  # CELEvalError: upstream reports the evaluation error as the cause
            out.append(_failure(path, value, rule, f"{exc.args[0] if exc.args else exc} evaluating rule: "
                                                   f"{rule['rule']}"))
            continue
        if result is not True and result != celtypes.BoolType(True):
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            if rule.get("messageExpression"):
                try:
                    message = str(compile_rule(rule["messageExpression"]).runner.evaluate(
                        {"self": _cel(value)}))
                except Exception:  # upstream falls back to the message, or the rule
                    pass
            out.append(_failure(path, value, rule, message))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _keyed(items: object, keys: list[str]) -> dict[tuple, Any]:
    if not isinstance(items, list):
        return {}
    return {tuple(i.get(k) for k in keys): i for i in items if isinstance(i, dict)}


def validate(value: Any, schema: Mapping[str, Any], old: Any = MISSING, path: str = "") -> list[Cause]:
    """Every failed rule under `schema`, each naming its field; `old` is the stored object on updates."""
    if value is None:
        return []
    if old is not MISSING and deep.equal(old, value):
        return []  # ratcheting: an unchanged value is not validated again
    out = _check_rules(schema, value, old, path)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub_value in value.items():
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            if sub is None:
                continue
            before = old.get(key, MISSING) if isinstance(old, dict) else MISSING
            out += validate(sub_value, sub, before, _join(path, key) if key in props else f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        olds = _keyed(old, keys) if schema.get("x-kubernetes-list-type") == "map" else {}
        for n, item in enumerate(value):
            before = olds.get(tuple(item.get(k) for k in keys), MISSING) if isinstance(item, dict) else MISSING
            out += validate(item, schema["items"], before, f"{path}[{n}]")
    return out


def rule_errors(schema: Mapping[str, Any], path: str) -> list[Cause]:
    """A CRD schema's rules that do not compile, each at its `x-kubernetes-validations[n].rule` path."""
    out: list[Cause] = []
    for n, rule in enumerate(schema.get("x-kubernetes-validations") or ()):
        for field in ("rule", "messageExpression"):
            if rule.get(field):
                try:
                    compile_rule(rule[field])
                except CompileError as exc:
                    out.append(Cause(f"{path}.x-kubernetes-validations[{n}].{field}",
                                     f"Invalid value: {rule[field]!r}: {exc}"))
    for sub, sub_path in subschemas(dict(schema), path):
        out += rule_errors(sub, sub_path)
    return out
