"""Built-in objects against Kubernetes' own published schemas, for the version the emulator reports.

Development emulator, not for production. Pure, apart from reading the schemas once. The schemas
are the OpenAPI definitions that `kubernetes-validate` ships (its strict copy, where every object
refuses undeclared fields), for the Kubernetes minor in `discovery.KUBE_VERSION`. They say what
kube-apiserver's JSON decoder enforces: which fields exist, their JSON types, and which are
required. Everything else kube-apiserver checks lives in Go code; `validation.py` carries the part
of it that liveplex's objects touch.

`decode` mirrors the decoder: an undeclared field is dropped (and reported, so a `Strict` request
can be refused with 400 as upstream does), a wrongly typed value is a 400 in the decoder's words.
`required` mirrors the `Required value` causes of validation, and runs on the defaulted object.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.resources
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from liveplex.emulator.apiserver import discovery, quantity
from liveplex.emulator.apiserver.errors import Cause

_SCHEMA_DIR = f"v{discovery.KUBE_VERSION['major']}.{discovery.KUBE_VERSION['minor']}.0-local-strict"
_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}
_GO_TYPES = {"string": "string", "boolean": "bool", "object": "map[string]interface {}", "array": "[]interface {}",
             "number": "float64"}


@dataclass(slots=True)
class Decoded:
    """What the decoder made of a body: the object without undeclared fields, and what it found."""

    obj: Any
    unknown: list[str] = field(default_factory=list)
    """Paths of undeclared fields (dropped from `obj`): `spec.template.spec.containers[0].foo`."""
    mistyped: list[str] = field(default_factory=list)
    """The decoder's messages for values of the wrong JSON type."""


@functools.cache
def _definitions() -> dict[str, dict]:
    root = importlib.resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", _SCHEMA_DIR)
    with root.joinpath("_definitions.json").open() as f:
        return json.load(f)["$defs"]


@functools.cache
def _by_kind() -> dict[tuple[str, str, str], str]:
    out = {}
    for name, node in _definitions().items():
        for gvk in node.get("x-kubernetes-group-version-kind") or []:
            out.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return out


def root(group: str, version: str, kind: str) -> str | None:
    """The definition name of a kind (`io.k8s.api.apps.v1.Deployment`); None if the schemas lack it."""
    return _by_kind().get((group, version, kind))


def _resolve(node: dict) -> tuple[dict, str | None]:
    """The node behind a `$ref`, and the Go type name when it was a reference."""
    ref = node.get("$ref")
    if ref is None:
        return node, None
    name = ref.rpartition("/")[2]
    return _definitions()[name], name.rpartition(".")[2]


def _types(node: dict) -> tuple[str, ...]:
    kinds = node.get("type")
    return () if kinds is None else (kinds,) if isinstance(kinds, str) else tuple(kinds)


def _matches(value: object, node: dict) -> bool:
    if "oneOf" in node:  # IntOrString and Quantity
        return any(_matches(value, _resolve(branch)[0]) for branch in node["oneOf"])
    kinds = _types(node)
    if not kinds or value is None and "null" in kinds:
        return True
    if isinstance(value, bool):
        return "boolean" in kinds
    if isinstance(value, int):
        return "integer" in kinds or "number" in kinds
    if isinstance(value, float):
        return "number" in kinds
    return {dict: "object", list: "array", str: "string"}.get(type(value), "") in kinds


def _go_type(node: dict, go_name: str | None) -> str:
    if "oneOf" in node:
        return go_name or "interface {}"
    kinds = [k for k in _types(node) if k != "null"]
    if not kinds:
        return "interface {}"
    if kinds[0] == "integer":
        return node.get("format", "int64")
    if kinds[0] == "object" and go_name:
        return f"v1.{go_name}"
    extra = node.get("additionalProperties")
    if kinds[0] == "object" and isinstance(extra, dict) and "string" in _types(extra):
        return "map[string]string"
    return _GO_TYPES.get(kinds[0], kinds[0])


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def decode(obj: Any, definition: str, path: str = "") -> Decoded:
    """`obj` as kube-apiserver's decoder would take it (see the module docstring); `path` is where
    `obj` sits in its object (`metadata` for an ObjectMeta decoded on its own)."""
    out = Decoded(obj)
    out.obj = _decode(obj, _definitions()[definition], path, definition.rpartition(".")[2], out)
    return out


_INT_RANGES = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def _format_error(value: Any, node: dict, where: str) -> str | None:
    """What Go's decoder says of a value of the right JSON type that its Go type cannot hold:
    an integer out of its range, bytes that are not base64, a time that is not RFC 3339."""
    fmt = node.get("format")
    if isinstance(value, int) and not isinstance(value, bool) and "integer" in _types(node):
        low, high = _INT_RANGES.get(fmt or "int64", _INT_RANGES["int64"])
        if not low <= value <= high:
            return f"json: cannot unmarshal number {value} into Go struct field {where} of type {fmt or 'int64'}"
    if isinstance(value, str) and fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            at = next((n for n, c in enumerate(value) if c not in _BASE64), len(value))
            return f"illegal base64 data at input byte {at}"
    if isinstance(value, str) and fmt == "date-time" and not _valid_time(value):
        return f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse "{value}" as "2006"'
    return None


_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _valid_time(value: str) -> bool:
    if not _RFC3339.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _decode(value: Any, node: dict, path: str, struct: str, out: Decoded) -> Any:
    node, go_name = _resolve(node)
    if not _matches(value, node):
        seen = _JSON_TYPES.get(type(value), "value")
        out.mistyped.append(f"json: cannot unmarshal {seen} into Go struct field {struct}.{path} of type "
                            f"{_go_type(node, go_name)}")
        return value
    problem = _format_error(value, node, f"{struct}.{path}")
    if problem is not None:
        out.mistyped.append(problem)
        return value
    if go_name == "Quantity" and value is not None and quantity.parse(value) is None:
        out.mistyped.append(quantity.ERROR)
        return value
    if isinstance(value, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        kept = {}
        for key, sub in value.items():
            where = _join(path, key) if props is not None else f"{path}[{key}]"
            if props is not None and key in props:
                if sub is not None:  # null into a Go struct field leaves it unset
                    kept[key] = _decode(sub, props[key], where, go_name or struct, out)
            elif isinstance(extra, dict):
                kept[key] = _decode(_zero(extra) if sub is None else sub, extra, where, go_name or struct, out)
            elif extra is False:
                out.unknown.append(where)
            else:
                kept[key] = sub
        return kept
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_decode(_zero(node["items"]) if item is None else item, node["items"], f"{path}[{n}]", struct, out)
                for n, item in enumerate(value)]
    return value


_ZEROS = {"object": dict, "string": str, "array": list, "integer": int, "number": int, "boolean": bool}


def _zero(node: dict) -> Any:
    """What Go's decoder leaves in a list element or a map value that was null: its type's zero value."""
    kinds = [k for k in _types(_resolve(node)[0]) if k != "null"]
    return _ZEROS[kinds[0]]() if kinds and kinds[0] in _ZEROS else None


def required(obj: Any, definition: str) -> list[Cause]:
    """`Required value` for every required field that is absent (or null), `status` aside.

    The schemas' `required` comes from Go fields without `omitempty`; outside `status` those are
    the ones validation requires too (container names, selectors, ports), but a status is written by
    controllers and upstream does not refuse one that leaves such fields out."""
    top = {k: v for k, v in obj.items() if k != "status"}
    return _required(top, _definitions()[definition], "")


def _required(value: Any, node: dict, path: str) -> list[Cause]:
    node, _ = _resolve(node)
    out: list[Cause] = []
    if isinstance(value, dict):
        props = node.get("properties") or {}
        for key in node.get("required") or ():
            if value.get(key) is None:
                out.append(Cause(_join(path, key), "Required value", "FieldValueRequired"))
        extra = node.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                out += _required(sub, props[key], _join(path, key))
            elif isinstance(extra, dict):
                out += _required(sub, extra, f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for n, item in enumerate(value):
            out += _required(item, node["items"], f"{path}[{n}]")
    return out
