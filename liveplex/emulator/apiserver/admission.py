"""Admission: what happens to an object between the request and the store, in kube-apiserver's order.

Development emulator, not for production. Pure (the store injects the Service address allocator).
The order is upstream's: decode (undeclared fields dropped, or a 400 under `fieldValidation=Strict`;
wrong JSON types a 400), default, validate (422 with every cause), and on updates the immutable
fields. Built-in types are decoded against Kubernetes' published schemas (`openapi.py`) and
validated by `validation.py`; custom resources by their CRD's schema (`schema.py`) and rules
(`cel.py`); a CRD itself by `crds.py`.
"""

from __future__ import annotations

from collections.abc import Callable

from liveplex.emulator.apiserver import builtins, cel, crds, errors, kinds, openapi, schema, validation

STRICT = "Strict"


def _cannot_decode(rt: kinds.ResourceType, version: str, why: str) -> errors.ApiError:
    return errors.bad_request(f'{rt.kind} in version "{version}" cannot be handled as a {rt.kind}: {why}')


def _unknown(rt: kinds.ResourceType, version: str, paths: list[str]) -> errors.ApiError:
    listed = ", ".join(f'unknown field "{p}"' for p in paths)
    return _cannot_decode(rt, version, f"strict decoding error: {listed}")


def admit(rt: kinds.ResourceType, obj: dict, old: dict | None, field_validation: str,
          cluster_ip: Callable[[], str]) -> dict:
    """`obj` decoded and defaulted, ready to store; raises the ApiError a real server answers with."""
    name = obj["metadata"].get("name", "")
    version = obj["apiVersion"].rpartition("/")[2]
    if rt.custom:
        obj = _custom(rt, obj, old, version, field_validation)
        causes = validation.object_meta(rt.key, obj["metadata"])
    else:
        obj, causes = _builtin(rt, obj, old, version, field_validation, cluster_ip)
    if causes:
        raise errors.invalid(rt.kind, rt.group, name, tuple(causes))
    return obj


def _builtin(rt: kinds.ResourceType, obj: dict, old: dict | None, version: str, field_validation: str,
             cluster_ip: Callable[[], str]) -> tuple[dict, list[errors.Cause]]:
    definition = openapi.root(rt.group, version, rt.kind)
    if definition is not None:
        decoded = openapi.decode(obj, definition)
        if decoded.mistyped:
            raise _cannot_decode(rt, version, decoded.mistyped[0])
        if decoded.unknown and field_validation == STRICT:
            raise _unknown(rt, version, decoded.unknown)
        obj = decoded.obj
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


def _custom(rt: kinds.ResourceType, obj: dict, old: dict | None, version: str, field_validation: str) -> dict:
    openapi_schema = rt.schemas.get(version) or {}
    if not openapi_schema:
        return obj
    obj = schema.apply_defaults(obj, openapi_schema)
    obj, dropped = schema.prune(obj, openapi_schema)
    if dropped and field_validation == STRICT:
        raise _unknown(rt, version, dropped)
    causes = schema.validate(obj, openapi_schema) or cel.validate(obj, openapi_schema,
                                                                   cel.MISSING if old is None else old)
    if causes:
        raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), tuple(causes))
    return obj
