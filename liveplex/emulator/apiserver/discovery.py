"""Discovery and OpenAPI documents rendered from the registry: what kubectl and kopf read first.

Development emulator, not for production. Pure. Only the legacy (unaggregated) discovery forms are
served: kubectl asks for aggregated discovery first and falls back when the answer is plain
`application/json`. OpenAPI v3 is served just far enough for kubectl: every group-version document
declares a PATCH operation per kind that takes `fieldValidation`, so kubectl validates on the server
instead of downloading schemas, and custom resources carry their CRD schema (for `kubectl explain`).
Built-in kinds have no schemas here, so kubectl's client-side apply computes strategic merge patches
from its compiled-in types. OpenAPI v2 is not served (kubectl wants it as protobuf; it copes without).
"""

from __future__ import annotations

import hashlib

from liveplex.emulator.apiserver import deep, kinds

KUBE_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-liveplex-emulator", "gitCommit": "",
                "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23.0",
                "compiler": "gc", "platform": "linux/amd64"}
"""`/version`: the Kubernetes minor the emulator imitates (kubectl warns on a skew of more than one)."""

SUBRESOURCE_VERBS = ["get", "patch", "update"]


def _gv(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def api_versions(server_address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group(name: str, versions: list[str]) -> dict:
    listed = [{"groupVersion": _gv(name, v), "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def api_groups(registry: kinds.Registry) -> dict:
    groups = [_group(g, vs) for g, vs in registry.group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: kinds.Registry, group: str) -> dict | None:
    versions = registry.group_versions().get(group)
    return None if not versions else {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def resource_list(registry: kinds.Registry, group: str, version: str) -> dict | None:
    """`APIResourceList` for one group-version, subresources included; None if it is not served."""
    resources = []
    for rt in registry:
        if rt.group != group or version not in rt.versions:
            continue
        resources.append({"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                          "kind": rt.kind, "verbs": list(rt.verbs), "shortNames": list(rt.short_names),
                          "categories": list(rt.categories)})
        base = {"singularName": "", "namespaced": rt.namespaced}
        if rt.status:
            resources.append({**base, "name": f"{rt.plural}/status", "kind": rt.kind, "verbs": SUBRESOURCE_VERBS})
        if rt.scale is not None:
            resources.append({**base, "name": f"{rt.plural}/scale", "group": "autoscaling", "version": "v1",
                              "kind": "Scale", "verbs": SUBRESOURCE_VERBS})
        if rt.key == kinds.POD_KEY:
            resources.append({**base, "name": "pods/log", "kind": "Pod", "verbs": ["get"]})
            resources.append({**base, "name": "pods/eviction", "group": "policy", "version": "v1", "kind": "Eviction",
                              "verbs": ["create"]})
        if rt.key == kinds.SERVICE_ACCOUNT_KEY:
            resources.append({**base, "name": "serviceaccounts/token", "group": "authentication.k8s.io",
                              "version": "v1", "kind": "TokenRequest", "verbs": ["create"]})
    if not resources:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": _gv(group, version), "resources": resources}


def _root_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def openapi_gv(registry: kinds.Registry, group: str, version: str) -> dict | None:
    """The OpenAPI v3 document of one group-version (see the module docstring for what is in it)."""
    paths: dict = {}
    schemas: dict = {}
    for rt in registry:
        if rt.group != group or version not in rt.versions:
            continue
        gvk = {"group": group, "version": version, "kind": rt.kind}
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        params = [{"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for p in ("dryRun", "fieldManager", "fieldValidation", "force")]
        paths[f"/{_root_path(group, version)}{scope}/{rt.plural}/{{name}}"] = {"patch": {
            "operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk, "parameters": params,
            "responses": {"200": {"description": "OK"}}}}
        openapi = rt.schemas.get(version)
        if openapi:
            schemas[f"{group}.{version}.{rt.kind}"] = {**openapi, "x-kubernetes-group-version-kind": [gvk]}
    if not paths:
        return None
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (liveplex emulator)", "version": "v1.32.0"},
            "paths": paths, "components": {"schemas": schemas}}


def openapi_root(registry: kinds.Registry) -> dict:
    """`/openapi/v3`: one entry per group-version, each with a hash that changes with its document."""
    out = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            doc = openapi_gv(registry, group, version)
            digest = hashlib.sha256(deep.dumps(doc, sort_keys=True)).hexdigest()[:16].upper()
            path = _root_path(group, version)
            out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": out}
