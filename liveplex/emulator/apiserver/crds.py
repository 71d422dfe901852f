"""A CustomResourceDefinition's own validation: what kube-apiserver refuses in a CRD at write time.

Development emulator, not for production. Pure. Besides the names and the single storage version,
each version's `openAPIV3Schema` must be structural (a type on every node that has properties or
items, unless it is int-or-string or preserves unknown fields; an object at the root; not both
`properties` and `additionalProperties`; `x-kubernetes-list-type: map` with its keys), every
`default` must be valid against its own schema, and every CEL rule must compile (`cel.py`).
"""

from __future__ import annotations

from liveplex.emulator.apiserver import cel, schema
from liveplex.emulator.apiserver.errors import Cause


def _structural(node: dict, path: str, root: bool = False) -> list[Cause]:
    out: list[Cause] = []
    kind = node.get("type")
    free = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    if root and kind != "object":
        out.append(Cause(f"{path}.type", f'Invalid value: "{kind or ""}": must be object at the root'
                         if kind else "Required value: must not be empty at the root", "FieldValueInvalid"
                         if kind else "FieldValueRequired"))
    elif not kind and not free and ("properties" in node or "items" in node or not root):
        out.append(Cause(f"{path}.type", "Required value: must not be empty for specified object fields"
                         if "properties" in node else "Required value: must not be empty for specified array items"
                         if "items" in node else "Required value: must not be empty", "FieldValueRequired"))
    if "properties" in node and isinstance(node.get("additionalProperties"), dict):
        out.append(Cause(f"{path}.additionalProperties",
                         "Forbidden: additionalProperties and properties are mutual exclusive", "FieldValueForbidden"))
    if node.get("x-kubernetes-list-type") == "map" and not node.get("x-kubernetes-list-map-keys"):
        out.append(Cause(f"{path}.x-kubernetes-list-map-keys",
                         "Required value: must not be empty if x-kubernetes-list-type is map", "FieldValueRequired"))
    if "default" in node:
        value, _ = schema.prune(node["default"], node, root=False)
        out += [Cause(f"{path}.default", f"Invalid value: {c.field or 'default'}: {c.message}")
                for c in schema.validate(value, node)]
    for sub, sub_path in schema.subschemas(node, path):
        out += _structural(sub, sub_path)
    return out


def check(crd: dict, old: dict | None) -> list[Cause]:
    """Causes for a defaulted CRD (`old` is the stored one on updates)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    expected = f"{names.get('plural')}.{spec.get('group')}"
    out = []
    if crd["metadata"]["name"] != expected:
        out.append(Cause("metadata.name", f'Invalid value: "{crd["metadata"]["name"]}": must be spec.names.plural+"."'
                                          "+spec.group"))
    if len([v for v in spec.get("versions") or [] if v.get("storage")]) != 1:
        out.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    for n, version in enumerate(spec.get("versions") or []):
        openapi = (version.get("schema") or {}).get("openAPIV3Schema")
        path = f"spec.versions[{n}].schema.openAPIV3Schema"
        if openapi is None:
            out.append(Cause(path, "Required value: schemas are required", "FieldValueRequired"))
            continue
        out += _structural(openapi, path, root=True)
        out += cel.rule_errors(openapi, path)
    return out
