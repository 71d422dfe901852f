"""A CustomResourceDefinition's own validation: what kube-apiserver refuses in a CRD at write time.

Development emulator, not for production. Pure. Besides the names and the single storage version,
each version's `openAPIV3Schema` must be structural (a type on every node that has properties or
items, unless it is int-or-string or preserves unknown fields; an object at the root; not both
`properties` and `additionalProperties`; `x-kubernetes-list-type: map` with its keys), every
`default` must be valid against its own schema, and every CEL rule must compile (`cel.py`). A
schema may nest at most `MAX_SCHEMA_DEPTH` levels (`schema_depth`, an emulator limit).
"""

from __future__ import annotations

from collections.abc import Callable

from liveplex.emulator.apiserver import cel, schema, validation
from liveplex.emulator.apiserver.errors import Cause

MAX_SCHEMA_DEPTH = 256
"""How many JSON levels a version's `openAPIV3Schema` may nest, the values of `default`, `example` and
`enum` not counted (they may nest as deep as any body). Upstream has no bound but the decoder's
10,000 levels; the emulator's schema walkers (the CRD's decoding and structural checks, then
defaulting, pruning, validation and CEL rules of every custom resource) recurse once per level of
the schema, and this keeps them well within Python's stack. No real CRD comes near it."""
_FREE_FORM = frozenset({"default", "example", "enum"})
SCOPES = ("Cluster", "Namespaced")
APPROVAL = "api-approved.kubernetes.io"
"""The annotation a CRD in a protected group (`*.k8s.io`, `*.kubernetes.io`) must carry."""


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
    if "pattern" in node:
        why = schema.pattern_error(node["pattern"])
        if why is not None:
            out.append(validation.invalid(f"{path}.pattern", node["pattern"],
                                          f"must be a valid regular expression, but isn't: {why}"))
    if "default" in node:
        value, _ = schema.prune(node["default"], node, root=False)
        out += [Cause(f"{path}.default", f"Invalid value: {c.field or 'default'}: {c.message}")
                for c in schema.validate(value, node)]
    for sub, sub_path in schema.subschemas(node, path):
        out += _structural(sub, sub_path)
    return out


def _label(path: str, value: str, check: Callable[[str], list[str]] = validation.dns1035_label,
           prefix: str = "") -> list[Cause]:
    errs = check(value)
    return [validation.invalid(path, value, prefix + ",".join(errs))] if errs else []


def _names(names: dict) -> list[Cause]:
    """ValidateCustomResourceDefinitionNames (apiextensions-apiserver/pkg/apis/apiextensions/validation)."""
    path = "spec.names"
    out = [validation.required(f"{path}.plural")] if not names.get("plural") else _label(
        f"{path}.plural", names["plural"])
    out += _label(f"{path}.singular", names["singular"]) if names.get("singular") else []
    kind, list_kind = names.get("kind") or "", names.get("listKind") or ""
    mixed = "may have mixed case, but should otherwise match: "
    out += [validation.required(f"{path}.kind")] if not kind else _label(f"{path}.kind", kind.lower(), prefix=mixed)
    out += _label(f"{path}.listKind", list_kind.lower(), prefix=mixed) if list_kind else []
    if list_kind and list_kind == kind:
        out.append(validation.invalid(f"{path}.listKind", list_kind, "kind and listKind may not be the same"))
    for n, short in enumerate(names.get("shortNames") or []):
        out += _label(f"{path}.shortNames[{n}]", short)
    return out


def _group_and_scope(crd: dict) -> list[Cause]:
    spec = crd.get("spec") or {}
    group = spec.get("group") or ""
    out = []
    if not group:
        out.append(validation.required("spec.group"))
    elif "." not in group:  # what keeps a CRD from shadowing `apps`, `batch`, the core group...
        out.append(validation.invalid("spec.group", group, "should be a domain with at least one dot"))
    else:
        out += _label("spec.group", group, validation.dns1123_subdomain)
    protected = group == "k8s.io" or group.endswith((".k8s.io", ".kubernetes.io")) or group == "kubernetes.io"
    if protected and APPROVAL not in ((crd.get("metadata") or {}).get("annotations") or {}):
        out.append(validation.required(f"metadata.annotations[{APPROVAL}]", "protected groups must have approval "
                                       f'annotation "{APPROVAL}", see https://github.com/kubernetes/enhancements/pull/1111'))
    if spec.get("scope") not in SCOPES:
        out.append(validation.unsupported("spec.scope", spec.get("scope") or "", SCOPES))
    seen: set[str] = set()
    for n, version in enumerate(spec.get("versions") or []):
        name = version.get("name") or ""
        here = f"spec.versions[{n}].name"
        out += [validation.required(here)] if not name else _label(here, name)
        out += [validation.duplicate(here, name)] if name in seen else []
        seen.add(name)
    return out


COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
COLUMN_FORMATS = ("int32", "int64", "float", "double", "byte", "date", "date-time", "password")


def _simple_path(path: str, value: str, under: tuple[str, ...] = ()) -> list[Cause]:
    """validateSimpleJSONPath, and for scale paths the part of the object they must point into."""
    if not value:
        return [validation.required(path)]
    if not value.startswith("."):
        return [validation.invalid(path, value, "must be a simple json path starting with .")]
    if under and not value.startswith(tuple(f"{u}." for u in under)):
        return [validation.invalid(path, value, f"should be a json path under {' or '.join(under)}")]
    return []


def _version_extras(version: dict, path: str) -> list[Cause]:
    """A version's printer columns (ValidateCustomResourceColumnDefinition) and scale paths."""
    out: list[Cause] = []
    for n, column in enumerate(version.get("additionalPrinterColumns") or []):
        here = f"{path}.additionalPrinterColumns[{n}]"
        out += [validation.required(f"{here}.name")] if not column.get("name") else []
        if column.get("type") not in COLUMN_TYPES:
            out.append(validation.unsupported(f"{here}.type", column.get("type") or "", COLUMN_TYPES))
        if column.get("format") and column["format"] not in COLUMN_FORMATS:
            out.append(validation.unsupported(f"{here}.format", column["format"], COLUMN_FORMATS))
        out += _simple_path(f"{here}.jsonPath", column.get("jsonPath") or "")
    scale = (version.get("subresources") or {}).get("scale")
    if scale is not None:
        here = f"{path}.subresources.scale"
        out += _simple_path(f"{here}.specReplicasPath", scale.get("specReplicasPath") or "", (".spec",))
        out += _simple_path(f"{here}.statusReplicasPath", scale.get("statusReplicasPath") or "", (".status",))
        if scale.get("labelSelectorPath"):
            out += _simple_path(f"{here}.labelSelectorPath", scale["labelSelectorPath"], (".spec", ".status"))
    return out


def schema_depth(crd: dict) -> list[Cause]:
    """A `Forbidden` cause for each version whose schema nests past `MAX_SCHEMA_DEPTH`. Iterative, and
    safe on a CRD not decoded yet (it runs first, so that nothing recursive walks a deeper one)."""
    spec = crd.get("spec")
    versions = spec.get("versions") if isinstance(spec, dict) else None
    out = []
    for n, version in enumerate(versions if isinstance(versions, list) else []):
        holder = version.get("schema") if isinstance(version, dict) else None
        stack = [(holder.get("openAPIV3Schema"), 0)] if isinstance(holder, dict) else []
        while stack:
            node, depth = stack.pop()
            if depth > MAX_SCHEMA_DEPTH:
                out.append(validation.forbidden(f"spec.versions[{n}].schema.openAPIV3Schema",
                                                f"must not nest deeper than {MAX_SCHEMA_DEPTH} levels (a limit of the "
                                                "liveplex emulator: its schema walkers recurse)"))
                break
            if isinstance(node, dict):
                stack += [(sub, depth + 1) for key, sub in node.items() if key not in _FREE_FORM]
            elif isinstance(node, list):
                stack += [(sub, depth + 1) for sub in node]
    return out


def check(crd: dict, old: dict | None) -> list[Cause]:
    """Causes for a defaulted CRD (`old` is the stored one on updates)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    expected = f"{names.get('plural')}.{spec.get('group')}"
    out = _names(names) + _group_and_scope(crd)
    if crd["metadata"]["name"] != expected:
        out.append(Cause("metadata.name", f'Invalid value: "{crd["metadata"]["name"]}": must be spec.names.plural+"."'
                                          "+spec.group"))
    if len([v for v in spec.get("versions") or [] if v.get("storage")]) != 1:
        out.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    for n, version in enumerate(spec.get("versions") or []):
        out += _version_extras(version, f"spec.versions[{n}]")
        openapi = (version.get("schema") or {}).get("openAPIV3Schema")
        path = f"spec.versions[{n}].schema.openAPIV3Schema"
        if openapi is None:
            out.append(Cause(path, "Required value: schemas are required", "FieldValueRequired"))
            continue
        out += _structural(openapi, path, root=True)
        out += cel.rule_errors(openapi, path)
    return out
