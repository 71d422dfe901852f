"""Defaulting and structural checking against the CRD's own schema: the API server's job, redone.

The operator cannot assume admission ran (the local emulator has none; an object may predate a
CRD upgrade), so it defaults and checks every LiveEngine itself before rendering. Only the schema
keywords `crd` uses are understood, with Kubernetes' meanings: unknown fields are refused (the
server would prune them, and strict field validation would refuse them), `pattern` is an
unanchored search, `x-kubernetes-int-or-string` takes an integer or a string. Cross-field rules
are `cel`'s. Pure.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from liveplex.operator import cel

Path = tuple[str | int, ...]


def render_path(path: Path) -> str:
    """`("spec", "pod", "env", 2, "name")` -> `spec.pod.env[2].name`."""
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


@dataclass(frozen=True, slots=True)
class Issue:
    """One reason a LiveEngine is refused, at a field path."""

    path: Path
    code: str
    """`required`, `unknown`, `type`, `enum`, `bounds`, `pattern`, `length`, `duplicate` or `rule`."""
    message: str

    def __str__(self) -> str:
        return f"{render_path(self.path)}: {self.message}"


def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """`value` with every absent defaulted field filled in, recursively; `value` is not changed."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for key, sub in schema["properties"].items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            if key in out:
                out[key] = apply_defaults(sub, out[key])
        return out
    if isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], item) for item in value]
    return value


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "integer": (int,),
}


def _type_ok(schema: Mapping[str, Any], value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    expected = schema.get("type")
    if expected is None:
        return True
    if isinstance(value, bool) and expected != "boolean":
        return False
    return isinstance(value, _TYPES[expected])


def check(schema: Mapping[str, Any], value: Any, path: Path = ()) -> list[Issue]:
    """Structural problems of `value` against `schema`, parents before children."""
    if not _type_ok(schema, value):
        wanted = "integer or string" if schema.get("x-kubernetes-int-or-string") else schema["type"]
        return [Issue(path, "type", f"must be of type {wanted}, got {type(value).__name__}")]
    issues = _check_value(schema, value, path)
    if isinstance(value, dict):
        issues += _check_object(schema, value, path)
    elif isinstance(value, list):
        issues += _check_array(schema, value, path)
    return issues


def _check_value(schema: Mapping[str, Any], value: Any, path: Path) -> list[Issue]:
    issues = []
    if "enum" in schema and value not in schema["enum"]:
        issues.append(Issue(path, "enum", f"must be one of {', '.join(map(str, schema['enum']))}, got {value!r}"))
    if isinstance(value, int) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            issues.append(Issue(path, "bounds", f"must lie in {low}..{high}, got {value}"))
    if isinstance(value, str):
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            issues.append(Issue(path, "pattern", f"{value!r} does not match {schema['pattern']}"))
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if len(value) < low or (high is not None and len(value) > high):
            issues.append(Issue(path, "length", f"length must lie in {low}..{high}, got {len(value)}"))
    return issues


def _check_object(schema: Mapping[str, Any], value: dict[str, Any], path: Path) -> list[Issue]:
    issues = [Issue((*path, key), "required", "is required") for key in schema.get("required", ())
              if key not in value]
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        issues.append(Issue(path, "length", f"at most {schema['maxProperties']} entries, got {len(value)}"))
    for key, item in value.items():
        if key in properties:
            issues += check(properties[key], item, (*path, key))
        elif isinstance(extra, Mapping):
            issues += check(extra, item, (*path, key))
        elif properties and not schema.get("x-kubernetes-preserve-unknown-fields"):
            issues.append(Issue((*path, key), "unknown", "is not a field of this object"))
    return issues


def _check_array(schema: Mapping[str, Any], value: list[Any], path: Path) -> list[Issue]:
    issues = []
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    if len(value) < low or (high is not None and len(value) > high):
        issues.append(Issue(path, "length", f"must hold {low}..{high} items, got {len(value)}"))
    for i, item in enumerate(value):
        issues += check(schema["items"], item, (*path, i))
    if schema.get("x-kubernetes-list-type") == "set":
        seen: list[Any] = []
        for i, item in enumerate(value):
            if item in seen:
                issues.append(Issue((*path, i), "duplicate", f"duplicate entry {item!r}"))
            seen.append(item)
    return issues


def rule_issues(obj: Mapping[str, Any]) -> list[Issue]:
    """The `cel.RULES` that `obj` (defaulted, structurally valid) breaks; a rule on an absent node holds."""
    issues = []
    for rule in cel.RULES:
        node: Any = obj
        for key in rule.at:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node is not None and not rule.holds(node):
            issues.append(Issue(rule.blames, "rule", rule.message))
    return issues
