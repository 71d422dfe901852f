"""Custom resources against their CRD's `openAPIV3Schema`: defaulting, pruning and validation.

Development emulator, not for production. Pure. An approximation of kube-apiserver's structural
schema handling: `default`s are filled in on every write, fields the schema does not declare are
pruned (kept under `x-kubernetes-preserve-unknown-fields`), and the value checks kube-openapi does
(type, nullable, enum, minimum/maximum, length, pattern, items, required) produce causes that name
the field in kube-apiserver's words, as do `maxProperties`/`minProperties`, the uniqueness of
`x-kubernetes-list-type` `set` and `map` lists and `format: date-time`. CEL rules
(`x-kubernetes-validations`) are evaluated by `cel.py`; other `format`s are not checked.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from datetime import datetime
from typing import overload

import re2

from liveplex.emulator.apiserver import deep
from liveplex.emulator.apiserver.errors import Cause

_ROOT_KEYS = ("apiVersion", "kind", "metadata")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def subschemas(node: dict, path: str) -> Iterator[tuple[dict, str]]:
    """A schema node's children with their paths in a CRD (`<path>.properties[spec]`, `<path>.items`)."""
    for key, sub in (node.get("properties") or {}).items():
        yield sub, f"{path}.properties[{key}]"
    for word in ("items", "additionalProperties"):
        if isinstance(node.get(word), dict):
            yield node[word], f"{path}.{word}"


@overload
def apply_defaults(value: dict, schema: dict) -> dict: ...
@overload
def apply_defaults(value: object, schema: dict) -> object: ...
def apply_defaults(value: object, schema: dict) -> object:
    """`value` with every missing property that has a `default` filled in, recursively."""
    if isinstance(value, dict):
        out = dict(value)
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = deep.clone(sub["default"])
            if key in out and out[key] is not None:
                out[key] = apply_defaults(out[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in out.keys() - props.keys():
                out[key] = apply_defaults(out[key], extra)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


@overload
def prune(value: dict, schema: dict, path: str = "", root: bool = True) -> tuple[dict, list[str]]: ...
@overload
def prune(value: object, schema: dict, path: str = "", root: bool = True) -> tuple[object, list[str]]: ...
def prune(value: object, schema: dict, path: str = "", root: bool = True) -> tuple[object, list[str]]:
    """`value` without the fields the schema does not declare, and the paths of what was dropped."""
    dropped: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_all = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
        out = {}
        for key, sub_value in value.items():
            sub = props.get(key) if key in props else (extra if isinstance(extra, dict) else None)
            if (root or schema.get("x-kubernetes-embedded-resource")) and key in _ROOT_KEYS:
                out[key] = sub_value  # the API server owns metadata, whatever the schema declares there
            elif sub is not None:
                out[key], lost = prune(sub_value, sub, _join(path, key), root=False)
                dropped += lost
            elif keep_all:
                out[key] = sub_value
            else:
                dropped.append(_join(path, key))
        return out, dropped
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        out_list = []
        for n, item in enumerate(value):
            pruned, lost = prune(item, schema["items"], f"{path}[{n}]", root=False)
            out_list.append(pruned)
            dropped += lost
        return out_list, dropped
    return value, dropped


@functools.lru_cache(maxsize=256)
def pattern(text: str) -> re2._Regexp:
    """A schema's `pattern` compiled by RE2, the engine kube-apiserver's Go regexp is: linear in the
    input whatever the pattern (`^(a+)+$` included), and refusing what Go refuses (backreferences,
    lookaround); `crds.check` refuses a CRD whose pattern does not compile, so this never raises
    for a stored one."""
    return re2.compile(text, _RE2_OPTIONS)


def pattern_error(text: str) -> str | None:
    """Why RE2 refuses `text`, in the words upstream's CRD validation quotes; None when it compiles."""
    try:
        pattern(text)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        return why.decode(errors="replace") if isinstance(why, bytes) else str(why)
    return None


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is an answer to the client, not a line on stderr


def _shown(value: object) -> str:
    return deep.dumps(value).decode()


def _type_ok(value: object, schema: dict) -> bool:
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    if kind is None:
        return True
    return {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, (int, float)) and not isinstance(value, bool),
    }.get(kind, True)


def _bounds(value: object, schema: dict, path: str) -> list[Cause]:
    out: list[Cause] = []
    here = path or "body"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema:
            low, strict = schema["minimum"], schema.get("exclusiveMinimum") is True
            if value < low or (strict and value == low):
                word = "greater than" if strict else "greater than or equal to"
                out.append(Cause(path, f"Invalid value: {_shown(value)}: {here} in body should be {word} {low}"))
        if "maximum" in schema:
            high, strict = schema["maximum"], schema.get("exclusiveMaximum") is True
            if value > high or (strict and value == high):
                word = "less than" if strict else "less than or equal to"
                out.append(Cause(path, f"Invalid value: {_shown(value)}: {here} in body should be {word} {high}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(Cause(path, f"Too long: may not be more than {schema['maxLength']} bytes", "FieldValueTooLong"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(Cause(path, f"Invalid value: {_shown(value)}: {here} in body should be at least "
                                   f"{schema['minLength']} chars long"))
        if "pattern" in schema and not pattern(schema["pattern"]).search(value):
            out.append(Cause(path, f"Invalid value: {_shown(value)}: {here} in body should match "
                                   f"'{schema['pattern']}'"))
    if isinstance(value, str) and schema.get("format") == "date-time" and not _date_time(value):
        out.append(Cause(path, f"Invalid value: {_shown(value)}: {here} in body must be of type date-time: "
                               f"{_shown(value)}"))
    if isinstance(value, dict):
        out += _counted(len(value), schema, path, "Properties", "properties")
    if isinstance(value, list):
        out += _unique(value, schema, path) + _counted(len(value), schema, path, "Items", "items")
    return out


def _counted(size: int, schema: dict, path: str, bound: str, noun: str) -> list[Cause]:
    """`max<bound>`/`min<bound>` on an object's properties or a list's items."""
    most, least = schema.get(f"max{bound}"), schema.get(f"min{bound}")
    if most is not None and size > most:
        return [Cause(path, f"Too many: {size}: must have at most {most} items", "FieldValueTooMany")]
    if least is not None and size < least:
        return [Cause(path, f"Invalid value: {size}: {path or 'body'} in body should have at least {least} {noun}")]
    return []


_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _date_time(value: str) -> bool:
    """RFC 3339, as kube-openapi's `date-time` format checker takes it."""
    if not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00").replace("t", "T"))
    except ValueError:
        return False
    return True


def _unique(items: list, schema: dict, path: str) -> list[Cause]:
    """`x-kubernetes-list-type`: a `set` holds no value twice, a `map` no key tuple twice."""
    kind = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: set[bytes] = set()
    out = []
    for n, item in enumerate(items):
        if kind == "set":
            key: object = item
        elif kind == "map" and isinstance(item, dict):
            key = {k: item[k] for k in keys if k in item}
        else:
            continue
        marker = deep.dumps(key, sort_keys=True)
        if marker in seen:
            out.append(Cause(f"{path}[{n}]", f"Duplicate value: {_shown(key)}", "FieldValueDuplicate"))
        seen.add(marker)
    return out


def validate(value: object, schema: dict, path: str = "") -> list[Cause]:
    """Every violation of the value checks, each naming its field (`spec.replicas`)."""
    if value is None:
        return [] if schema.get("nullable") or not schema.get("type") else [
            Cause(path, f"Invalid value: \"null\": {path or 'body'} in body must be of type {schema['type']}: "
                        f"\"null\"", "FieldValueTypeInvalid")]
    if not _type_ok(value, schema):
        kind = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
        return [Cause(path, f"Invalid value: {_shown(value)}: {path or 'body'} in body must be of type {kind}: "
                            f"{_shown(type(value).__name__)}", "FieldValueTypeInvalid")]
    out = _bounds(value, schema, path)
    if "enum" in schema and not deep.contains(schema["enum"], value):
        listed = ", ".join(_shown(v) for v in schema["enum"])
        out.append(Cause(path, f"Unsupported value: {_shown(value)}: supported values: {listed}",
                         "FieldValueNotSupported"))
    for sub in schema.get("allOf") or []:
        out += validate(value, sub, path)
    for word in ("anyOf", "oneOf"):
        branches = schema.get(word) or []
        if branches and all(validate(value, b, path) for b in branches):
            out.append(Cause(path, f"Invalid value: {_shown(value)}: {path or 'body'} in body must match "
                                   f"{'at least' if word == 'anyOf' else 'exactly'} one schema ({word})"))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                out.append(Cause(_join(path, key), "Required value", "FieldValueRequired"))
        extra = schema.get("additionalProperties")
        for key, sub_value in value.items():
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is not None and not (path == "" and key in _ROOT_KEYS):
                out += validate(sub_value, sub, _join(path, key))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for n, item in enumerate(value):
            out += validate(item, schema["items"], f"{path}[{n}]")
    return out
