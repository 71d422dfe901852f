"""Label and field selectors: parsing the query-string forms, matching objects, rendering `LabelSelector`s.

Development emulator, not for production. Pure. Label selectors take the full grammar
(`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`). Field selectors take `=`, `==`
and `!=` on the labels a kind's field label conversion takes (`convert_fields`; kube-apiserver
refuses the rest with 400), each matched against the path it names in the object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from liveplex.emulator.apiserver import errors


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause: `key op values`; op is one of `=`, `!=`, `in`, `notin`, `exists`, `!`."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values  # != and notin


Selector = tuple[Requirement, ...]
"""All requirements must hold; the empty selector matches everything."""

_SET = re.compile(r"(!?)\s*([A-Za-z0-9_./-]+)(?:\s*(in|notin)\s*\(([^)]*)\))?")
_EQ = re.compile(r"([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)")
"""Matched (`fullmatch`) against a stripped clause: no two neighbouring parts can take the same
characters, so a failing match costs linear time however many spaces a selector carries."""
_FIELD = re.compile(r"([A-Za-z0-9_.]+)\s*(==|=|!=)(.*)", re.DOTALL)


def _clauses(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    out, depth, start = [], 0, 0
    for n, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            out.append(text[start:n])
            start = n + 1
    out.append(text[start:])
    return [c for c in out if c.strip()]


def parse_labels(text: str | None) -> Selector:
    """`app=x,tier in (a,b),!canary` -> requirements; 400 on bad syntax."""
    reqs: list[Requirement] = []
    for clause in _clauses(text or ""):
        clause = clause.strip()
        eq = _EQ.fullmatch(clause)
        if eq:
            key, op, value = eq.groups()
            reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
            continue
        st = _SET.fullmatch(clause)
        if not st or (st.group(1) and st.group(3)):
            raise errors.bad_request(f"unable to parse requirement: {clause.strip()!r}")
        bang, key, op, values = st.groups()
        if op:
            reqs.append(Requirement(key, op, tuple(v.strip() for v in values.split(",") if v.strip())))
        else:
            reqs.append(Requirement(key, "!" if bang else "exists"))
    return tuple(reqs)


def matches_labels(selector: Selector, obj: Mapping) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in selector)


def from_label_selector(selector: Mapping | None) -> Selector:
    """A `metav1.LabelSelector` (matchLabels + matchExpressions) as requirements."""
    selector = selector or {}
    reqs = [Requirement(k, "=", (str(v),)) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        # validation (`validation.label_selector`) refuses a missing key or an unknown operator; read
        # leniently here so that it can name them rather than fail on them
        reqs.append(Requirement(expr.get("key") or "", ops.get(expr.get("operator"), "in"),
                                tuple(expr.get("values") or ())))
    return tuple(reqs)


def render(selector: Selector) -> str:
    """The string form (`status.selector` of a scale subresource, `kubectl get -l`)."""
    parts = []
    for r in selector:
        if r.op in ("=", "!="):
            parts.append(f"{r.key}{r.op}{r.values[0]}")
        elif r.op in ("in", "notin"):
            parts.append(f"{r.key} {r.op} ({','.join(r.values)})")
        else:
            parts.append(r.key if r.op == "exists" else f"!{r.key}")
    return ",".join(parts)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    equal: bool


def parse_fields(text: str | None) -> tuple[FieldRequirement, ...]:
    out = []
    for clause in _clauses(text or ""):
        match = _FIELD.fullmatch(clause.strip())
        if not match:
            raise errors.bad_request(f"invalid field selector: {clause.strip()!r}")
        path, op, value = match.groups()
        out.append(FieldRequirement(tuple(path.split(".")), value.strip(), op != "!="))
    return tuple(out)


DEFAULT_FIELDS = ("metadata.name", "metadata.namespace")
"""What apimachinery's DefaultMetaV1FieldSelectorConversion takes, for kinds without a conversion of their own."""


def convert_fields(requirements: tuple[FieldRequirement, ...],
                   labels: Mapping[str, str] | None) -> tuple[FieldRequirement, ...]:
    """Each requirement on the path its label selects, through the kind's field label conversion
    (`labels`: label -> path; None: the default one); 400 for a label it does not take, in the
    conversion's words (handlers/get.go)."""
    out = []
    for r in requirements:
        label = ".".join(r.path)
        path = (labels or dict(zip(DEFAULT_FIELDS, DEFAULT_FIELDS, strict=True))).get(label)
        if path is None:
            raise errors.bad_request(f"field label not supported: {label}" if labels is not None else
                                     f'"{label}" is not a known field selector: only "{DEFAULT_FIELDS[0]}", '
                                     f'"{DEFAULT_FIELDS[1]}"')
        out.append(FieldRequirement(tuple(path.split(".")), r.value, r.equal))
    return tuple(out)


def _field(obj: Mapping, path: tuple[str, ...]) -> str:
    node: object = obj
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def matches_fields(requirements: tuple[FieldRequirement, ...], obj: Mapping) -> bool:
    return all((_field(obj, r.path) == r.value) == r.equal for r in requirements)
