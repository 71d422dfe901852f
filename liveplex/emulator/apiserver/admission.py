"""Admission: what happens to an object between the request and the store, in kube-apiserver's order.

Development emulator, not for production. Pure (the store injects the Service address allocator).
The order is upstream's: decode (undeclared fields dropped, or, with the keys the body repeats, a
400 under `fieldValidation=Strict`; wrong JSON types a 400), default, validate (422 with every
cause), and on updates the immutable fields. Built-in types are decoded against Kubernetes'
published schemas (`openapi.py`) and validated by `validation.py`; custom resources by their CRD's
schema (`schema.py`) and rules (`cel.py`); a CRD itself by `crds.py`, whose schema depth is
checked before anything walks it.
"""

from __future__ import annotations

from collections.abc import Callable

from liveplex.emulator.apiserver import builtins, cel, crds, errors, kinds, openapi, schema, validation

STRICT = "Strict"


OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_JSON_NAMES = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def _strict(rt: kinds.ResourceType, version: str, found: tuple[str, ...], unknown: list[str],
            field_validation: str) -> None:
    """`fieldValidation=Strict`: the strict decoder's errors, the body's repeated keys first, then the
    undeclared fields (runtime.NewStrictDecodingError). A 400 in a body, 422 in a patch's result
    (`errors.Undecodable`); other directives drop the fields and keep the last of the repeated keys."""
    listed = [*found, *(f'unknown field "{p}"' for p in unknown)]
    if listed and field_validation == STRICT:
        raise errors.undecodable(rt.kind, version, f"strict decoding error: {', '.join(listed)}")


def typed(rt: kinds.ResourceType, obj: object) -> dict:
    """`obj` if it is the object Go's decoder would make an `rt` of, as far as the steps before
    admission read it (an object, its apiVersion and kind strings, its metadata an ObjectMeta), else
    the decoder's 400. The rest is decoded first thing in admission: a built-in against its whole
    schema (`_builtin`, 400), a custom resource against its CRD's (`_custom`, 422)."""
    if not isinstance(obj, dict):
        raise errors.undecodable(rt.kind, rt.preferred, f"the body must be a JSON object, not "
                                                        f"{_JSON_NAMES.get(type(obj))}")
    version = rt.preferred
    for field in ("apiVersion", "kind"):
        value = obj.get(field)
        if value is not None and not isinstance(value, str):
            raise errors.undecodable(rt.kind, version, f"json: cannot unmarshal {_JSON_NAMES.get(type(value))} into Go "
                                                   f"struct field TypeMeta.{field} of type string")
    if "metadata" in obj and obj["metadata"] is None:  # a null ObjectMeta decodes as an empty one
        obj["metadata"] = {}
    if isinstance(obj.get("apiVersion"), str):
        version = obj["apiVersion"].rpartition("/")[2]
    decoded = openapi.decode(obj.get("metadata"), OBJECT_META, "metadata")
    if decoded.mistyped:
        raise errors.undecodable(rt.kind, version, decoded.mistyped[0])
    return obj


def typed_as(kind: str, group: str, version: str, body: object) -> dict:
    """A request body that is not a stored kind (DeleteOptions, TokenRequest, Scale, ...), as `typed`."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of a {kind} must be a JSON object, not {_JSON_NAMES.get(type(body))}")
    definition = openapi.root(group, version, kind)
    decoded = openapi.decode(body, definition) if definition is not None else None
    if decoded is not None and decoded.mistyped:
        raise errors.undecodable(kind, version, decoded.mistyped[0])
    return body


def same_object(obj: dict, name: str, namespace: str) -> None:
    """upstream's checkName (endpoints/handlers/rest.go): an update or a patch may not rename or move
    the object the URL names (400)."""
    meta = obj.get("metadata") or {}
    if meta.get("name", "") != name:
        raise errors.bad_request(f"the name of the object ({meta.get('name', '')}) does not match the name on the URL "
                                 f"({name})")
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request(f"the namespace of the object ({meta['namespace']}) does not match the namespace on "
                                 f"the request ({namespace})")


def admit(rt: kinds.ResourceType, obj: dict, old: dict | None, field_validation: str,
          cluster_ip: Callable[[], str], found: tuple[str, ...] = ()) -> dict:
    """`obj` decoded and defaulted, ready to store; raises the ApiError a real server answers with.
    `found`: the strict decoder's errors in the request body itself (`bodies.strict_errors`)."""
    name = obj["metadata"].get("name", "")
    version = obj["apiVersion"].rpartition("/")[2]
    if rt.custom:
        obj = _custom(rt, obj, old, version, field_validation, found)
        causes = validation.object_meta(rt.key, obj["metadata"])
    else:
        obj, causes = _builtin(rt, obj, old, version, field_validation, cluster_ip, found)
    if causes:
        raise errors.invalid(rt.kind, rt.group, name, tuple(dict.fromkeys(causes)))  # the schema and Go rules overlap
    return obj


def _builtin(rt: kinds.ResourceType, obj: dict, old: dict | None, version: str, field_validation: str,
             cluster_ip: Callable[[], str], found: tuple[str, ...]) -> tuple[dict, list[errors.Cause]]:
    too_deep = crds.schema_depth(obj) if rt.key == kinds.CRD_KEY else []
    if too_deep:
        raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), tuple(too_deep))
    definition = openapi.root(rt.group, version, rt.kind)
    unknown: list[str] = []
    if definition is not None:
        decoded = openapi.decode(obj, definition)
        if decoded.mistyped:
            raise errors.undecodable(rt.kind, version, decoded.mistyped[0])
        obj, unknown = decoded.obj, decoded.unknown
    _strict(rt, version, found, unknown, field_validation)
    if old is not None and rt.key == "/services":
        _keep_allocated(old, obj)
    obj = builtins.default(rt.key, obj, cluster_ip)
    causes = openapi.required(obj, definition) if definition is not None else []
    causes += validation.check(rt.key, obj)
    if old is not None:
        causes += validation.check_update(rt.key, old, obj)
    if rt.key == kinds.CRD_KEY:
        causes += crds.check(obj, old)
        if old is None:  # upstream adds it at create only, so the finalizer controller can drop it
            finalizers = obj["metadata"].setdefault("finalizers", [])
            finalizers += [] if kinds.CRD_CLEANUP in finalizers else [kinds.CRD_CLEANUP]
    return obj, causes


def _keep_allocated(old: dict, new: dict) -> None:
    """An update that leaves out the Service's allocated address keeps it, as upstream's REST does."""
    before, after = old.get("spec") or {}, new.setdefault("spec", {})
    for field in ("clusterIP", "clusterIPs"):
        if not after.get(field) and before.get(field):
            after[field] = before[field]


def _custom(rt: kinds.ResourceType, obj: dict, old: dict | None, version: str, field_validation: str,
            found: tuple[str, ...]) -> dict:
    openapi_schema = rt.schemas.get(version) or {}
    if not openapi_schema:
        _strict(rt, version, found, [], field_validation)
        return obj
    obj = schema.apply_defaults(obj, openapi_schema)
    obj, dropped = schema.prune(obj, openapi_schema)
    _strict(rt, version, found, dropped, field_validation)
    causes = schema.validate(obj, openapi_schema) or cel.validate(obj, openapi_schema,
                                                                   cel.MISSING if old is None else old)
    if causes:
        raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), tuple(causes))
    return obj
