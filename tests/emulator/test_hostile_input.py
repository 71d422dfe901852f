"""A fuzz corpus: hostile requests against one emulator, each with the answer a real API server gives.

Every case is one request (malformed, mistyped, oversized, poisonous, or a control that must be
admitted) and the status code and reason written down for it, with where upstream's answer comes
from. All cases run against one emulator over loopback HTTPS, in order, on one client: a case
whose answer dropped the connection would fail the next. `conftest.no_internal_errors` fails any
case the API server answered 500, and the last test checks that nothing poisoned a list.

Upstream references (kubernetes v1.32):
- DECODE: apimachinery's JSON serializer into the Go type, answered by the create/update handlers
  (apiserver/pkg/endpoints/handlers/create.go, update.go) as 400 BadRequest
  `<Kind> in version "v1" cannot be handled as a <Kind>: json: cannot unmarshal ...`.
- SIZE: apiserver/pkg/server/config.go MaxRequestBodyBytes = 3 MiB -> 413 RequestEntityTooLarge;
  handlers/patch.go maxJSONPatchOperations = 10000 -> 413.
- MEDIA: handlers/negotiation NewUnsupportedMediaTypeError -> 415 UnsupportedMediaType; a patch's
  media type must be one of the patch types (handlers/patch.go).
- PATCH: handlers/patch.go: a JSON Patch that is not a list of objects is 400 (jsonpatch.DecodePatch),
  one that fails to apply 422; a patched object the decoder refuses is 422 (field `patch`);
  strategic directives through interpretStrategicMergePatchError (400 format errors, 422 retainKeys).
- NAME: handlers/rest.go checkName -> 400 `the name of the object (x) does not match the name on the URL (y)`.
- CRD: apiextensions-apiserver/pkg/apis/apiextensions/validation -> 422 Invalid.
- DELETE: apimachinery/pkg/apis/meta/v1/validation ValidateDeleteOptions -> 422; undecodable -> 400.
- TOKEN: pkg/apis/authentication/validation ValidateTokenRequest -> 422 below 10 minutes, above 2^32 s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import orjson
import pytest
import pytest_asyncio

from liveplex.emulator import Emulator

from .objects import WIDGET_CRD

pytestmark = pytest.mark.asyncio(loop_scope="module")

NS = "hostile"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CM = f"/api/v1/namespaces/{NS}/configmaps"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
WIDGETS = f"/apis/test.liveplex.io/v1/namespaces/{NS}/widgets"
JSON, YAML, MERGE = "application/json", "application/yaml", "application/merge-patch+json"
JSON_PATCH, STRATEGIC = "application/json-patch+json", "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
_CONTAINER = {"name": "c", "image": "busybox"}

KINDS: dict[str, tuple[str, dict]] = {
    "configmaps": (CM, {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}}),
    "secrets": (f"/api/v1/namespaces/{NS}/secrets", {"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="}}),
    "services": (f"/api/v1/namespaces/{NS}/services",
                 {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}),
    "pods": (f"/api/v1/namespaces/{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [_CONTAINER]}}),
    "serviceaccounts": (f"/api/v1/namespaces/{NS}/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount"}),
    "deployments": (DEPLOY, {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [_CONTAINER]}}}}),
    "roles": (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles",
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "rules": []}),
    "leases": (f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
               {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {}}),
    "widgets": (WIDGETS, {"apiVersion": "test.liveplex.io/v1", "kind": "Widget", "spec": {}}),
    "namespaces": ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace"}),
}
"""Every kind the corpus writes: its collection and a minimal valid body (without metadata)."""


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    path: str
    code: int
    """The status a real API server answers (and the emulator must)."""
    body: object = None
    """bytes as they are, anything else as JSON; None sends no body."""
    content_type: str | None = JSON
    upstream: str = ""
    """Where the expected answer comes from (the module docstring's keys), or why it differs."""
    then: tuple[tuple[str, str, int], ...] = ()
    """Requests after the case and their codes: what a refused request must have left as it was."""
    params: dict[str, str] = field(default_factory=dict)

    @property
    def reason(self) -> str | None:
        return {400: "BadRequest", 405: "MethodNotAllowed", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType",
                422: "Invalid", 404: "NotFound"}.get(self.code)


def _obj(kind: str, metadata: object, **extra: object) -> dict:
    return {**KINDS[kind][1], "metadata": metadata, **extra}


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"{}" + b"}" * depth


# --- metadata and envelope types, for every kind --------------------------------------------------

BAD_METADATA: list[tuple[str, object]] = [
    ("metadata", []), ("metadata", "x"), ("metadata", 5), ("name", 5), ("name", ["a"]), ("generateName", 5),
    ("namespace", 5), ("uid", 5), ("resourceVersion", 5), ("generation", "1"), ("generation", 2 ** 63),
    ("creationTimestamp", 5), ("creationTimestamp", "yesterday"), ("deletionTimestamp", "2024-13-45T00:00:00Z"),
    ("deletionGracePeriodSeconds", "30"), ("labels", ["a"]), ("labels", "a=b"), ("labels", {"a": 1}),
    ("labels", {"a": {"b": "c"}}), ("annotations", "x"), ("annotations", {"a": 5}), ("annotations", {"a": ["b"]}),
    ("ownerReferences", "x"), ("ownerReferences", [1]),
    ("ownerReferences", [{"apiVersion": 5, "kind": "ConfigMap", "name": "y", "uid": "z"}]),
    ("finalizers", "x"), ("finalizers", [1]), ("managedFields", "x"), ("managedFields", [1]),
]


def _metadata_cases() -> list[Case]:
    out = []
    for kind, (path, _) in KINDS.items():
        for n, (key, value) in enumerate(BAD_METADATA):
            meta = value if key == "metadata" else {key: value} if key in ("name", "generateName") else {
                "name": f"bad-{n}", key: value}
            out.append(Case(f"{kind}-metadata.{key}-{type(value).__name__}-{n}", "POST", path, 400, _obj(kind, meta),
                            upstream="DECODE (custom resources: the emulator decodes metadata as ObjectMeta too)"))
        for n, body in enumerate(([], "x", 5, None, True)):
            out.append(Case(f"{kind}-body-{n}", "POST", path, 400, orjson.dumps(body), upstream="DECODE"))
        out.append(Case(f"{kind}-apiVersion-number", "POST", path, 400, {**_obj(kind, {"name": "av"}), "apiVersion": 5},
                        upstream="DECODE"))
        out.append(Case(f"{kind}-apiVersion-null", "POST", path, 400, {**_obj(kind, {"name": "av"}), "apiVersion": None},
                        upstream="handlers/create.go: the API version in the data does not match"))
        out.append(Case(f"{kind}-metadata-null", "POST", path, 422, _obj(kind, None),
                        upstream="null decodes as an empty ObjectMeta: metadata.name Required value"))
        out.append(Case(f"{kind}-kind-list", "POST", path, 400, {**_obj(kind, {"name": "kl"}), "kind": []},
                        upstream="DECODE"))
    return out


# --- media types, sizes, depth, encodings ---------------------------------------------------------

ALIAS_BOMB = b"""apiVersion: v1
kind: ConfigMap
metadata: {name: bomb}
x: &a ["l","o","l","o","l","o","l","o","l","o"]
y: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
z: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
w: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
"""


def _yaml_cm(name: str, rest: str) -> bytes:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{rest}".encode()


def _encoding_cases() -> list[Case]:
    cm = orjson.dumps(_obj("configmaps", {"name": "media"}))
    head, tail = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"', b'"}}'
    big = head + b"x" * (3 << 20) + tail
    under = head + b"x" * ((3 << 20) - len(head) - len(tail)) + tail
    return [
        *(Case(f"media-{t}", "POST", CM, 415, cm, t, "MEDIA") for t in (
            "text/plain", "application/xml", "application/x-www-form-urlencoded", "multipart/form-data",
            "application/vnd.kubernetes.protobuf", "application/merge-patch+json", "image/png")),
        Case("media-json-charset", "POST", CM, 201, orjson.dumps(_obj("configmaps", {"name": "charset"})),
             "application/json; charset=utf-8", "MEDIA: parameters are ignored"),
        Case("media-none-is-json", "POST", CM, 201, orjson.dumps(_obj("configmaps", {"name": "no-type"})), None,
             "MEDIA: no Content-Type reads as JSON"),
        Case("media-yaml", "POST", CM, 201, _yaml_cm("as-yaml", "data: {a: b}\n"), YAML, "MEDIA"),
        Case("size-3MiB-plus", "POST", CM, 413, big, upstream="SIZE"),
        Case("size-5MB", "POST", CM, 413, b" " * 5_000_000, upstream="SIZE"),
        Case("size-3MiB-exactly", "POST", CM, 422, under,
             upstream="SIZE lets 3 MiB through; ValidateConfigMap caps its data at 1 MiB (core.MaxSecretSize)"),
        Case("depth-129-json", "POST", WIDGETS, 400, b'{"metadata":{"name":"deep"},"spec":' + _nested(129) + b"}",
             upstream="the emulator's depth limit (128, docs/emulator.md; upstream 10,000)"),
        Case("depth-2000-json", "POST", WIDGETS, 400, b'{"metadata":{"name":"deep"},"spec":' + _nested(2000) + b"}"),
        Case("depth-240-affinity", "POST", f"/api/v1/namespaces/{NS}/pods", 400, orjson.loads(
            b'{"metadata":{"name":"deep"},"spec":{"containers":[{"name":"c","image":"i"}],"affinity":'
            + _nested(240) + b"}}")),
        Case("depth-300-yaml", "POST", CM, 400, _yaml_cm("deep", "data: " + "{a: " * 300 + "{}" + "}" * 300), YAML),
        Case("yaml-alias-bomb", "POST", CM, 400, ALIAS_BOMB, YAML, "the emulator refuses YAML aliases"),
        Case("yaml-one-alias", "POST", CM, 400, _yaml_cm("alias", "data: &d {a: b}\nbinaryData: *d\n"), YAML),
        Case("yaml-lone-surrogate", "POST", CM, 400,
             _yaml_cm("surrogate", '  annotations: {a: "\\ud800"}\n'), YAML),
        Case("yaml-null-key", "POST", CM, 400, _yaml_cm("nullkey", "data: {~: a}\n"), YAML),
        Case("yaml-complex-key", "POST", CM, 400, _yaml_cm("complexkey", "data: {? [a, b] : c}\n"), YAML),
        Case("yaml-binary", "POST", CM, 400, _yaml_cm("binary", "data: {a: !!binary aGVsbG8=}\n"), YAML),
        Case("yaml-infinity", "POST", WIDGETS, 400,
             b"apiVersion: test.liveplex.io/v1\nkind: Widget\nmetadata: {name: inf}\nspec: {replicas: .inf}\n", YAML),
        Case("yaml-huge-int", "POST", WIDGETS, 400,
             b"apiVersion: test.liveplex.io/v1\nkind: Widget\nmetadata: {name: huge}\nspec: {replicas: "
             + str(2 ** 70).encode() + b"}\n", YAML),
        Case("yaml-two-documents", "POST", CM, 400, _yaml_cm("two", "---\na: b\n"), YAML),
        Case("yaml-int-key-becomes-text", "POST", CM, 201, _yaml_cm("intkey", "  labels: {1: a}\n"), YAML,
             "sigs.k8s.io/yaml turns an integer key into its text"),
        Case("yaml-timestamp-stays-text", "POST", CM, 201, _yaml_cm("stamp", "  labels: {a: 2020-01-01}\n"), YAML),
        Case("json-lone-surrogate", "POST", CM, 400,
             b'{"metadata":{"name":"s","annotations":{"a":"\\ud800"}}}'),
        Case("json-invalid-utf8", "POST", CM, 400, b'{"metadata":{"name":"\xff"}}'),
        Case("json-trailing-garbage", "POST", CM, 400, b'{"metadata":{"name":"t"}} x'),
        Case("json-nul-in-name", "POST", CM, 422, {"metadata": {"name": "a\u0000b"}}),
    ]


# --- field types and ranges -----------------------------------------------------------------------

def _deployment(name: str, replicas: object = 1, port: object = 80) -> dict:
    body = orjson.loads(orjson.dumps(KINDS["deployments"][1]))
    body["metadata"] = {"name": name}
    body["spec"]["replicas"] = replicas
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": port}]
    return body


def _field_cases() -> list[Case]:
    secrets = KINDS["secrets"][0]
    return [
        Case("int32-replicas", "POST", DEPLOY, 400, _deployment("r", replicas=2 ** 31), upstream="DECODE"),
        Case("int32-replicas-negative", "POST", DEPLOY, 400, _deployment("r", replicas=-(2 ** 31) - 1)),
        Case("float-replicas", "POST", DEPLOY, 400, _deployment("r", replicas=1.5)),
        Case("string-replicas", "POST", DEPLOY, 400, _deployment("r", replicas="3")),
        Case("int32-container-port", "POST", DEPLOY, 400, _deployment("p", port=2 ** 31)),
        Case("int32-max-is-decoded", "POST", DEPLOY, 422, _deployment("p", port=2 ** 31 - 1),
             upstream="decodes, then validation: port must be between 1 and 65535"),
        Case("int32-service-port", "POST", KINDS["services"][0], 400,
             _obj("services", {"name": "p"}, spec={"ports": [{"port": 2 ** 40}]})),
        Case("int64-grace", "POST", KINDS["pods"][0], 400,
             _obj("pods", {"name": "g"}, spec={"containers": [_CONTAINER], "terminationGracePeriodSeconds": 2 ** 63})),
        Case("base64-bang", "POST", secrets, 400, _obj("secrets", {"name": "b"}, data={"a": "!!!"}), upstream="DECODE"),
        Case("base64-unpadded", "POST", secrets, 400, _obj("secrets", {"name": "b"}, data={"a": "YQ"})),
        Case("base64-number", "POST", secrets, 400, _obj("secrets", {"name": "b"}, data={"a": 5})),
        Case("stringData-number", "POST", secrets, 400, _obj("secrets", {"name": "b"}, stringData={"a": 5})),
        Case("base64-valid", "POST", secrets, 201, _obj("secrets", {"name": "b64"}, data={"a": "YQ=="})),
        Case("null-container", "POST", DEPLOY, 422, {**_deployment("n"), "spec": {**_deployment("n")["spec"], "template": {
            "metadata": {"labels": {"app": "x"}}, "spec": {"containers": [None]}}}},
             upstream="a null list element decodes as the zero Container: name Required value"),
        Case("null-label-value", "POST", CM, 201, _obj("configmaps", {"name": "nullabel", "labels": {"a": None}}),
             upstream="a null map value decodes as the empty string, a valid label value"),
        Case("selector-expression-without-key", "POST", DEPLOY, 422, {**_deployment("e"), "spec": {
            **_deployment("e")["spec"], "selector": {"matchLabels": {"app": "x"}, "matchExpressions": [
                {"operator": "In", "values": ["x"]}]}}}, upstream="ValidateLabelSelector"),
        Case("selector-expression-bad-operator", "POST", DEPLOY, 422, {**_deployment("e"), "spec": {
            **_deployment("e")["spec"], "selector": {"matchLabels": {"app": "x"}, "matchExpressions": [
                {"key": "app", "operator": "Near"}]}}}, upstream="ValidateLabelSelector"),
        Case("namespace-mismatch", "POST", CM, 400, _obj("configmaps", {"name": "m", "namespace": "default"}),
             upstream="handlers/create.go: the namespace of the provided object does not match"),
        Case("kind-mismatch", "POST", CM, 400, {**_obj("configmaps", {"name": "m"}), "kind": "Secret"}),
    ]


# --- updates and patches on existing objects --------------------------------------------------------

def _update_cases() -> list[Case]:
    target = f"{CM}/target"
    intact = (("GET", target, 200),)
    return [
        Case("put-other-name", "PUT", target, 400, _obj("configmaps", {"name": "other"}), upstream="NAME", then=intact),
        Case("put-no-name", "PUT", target, 400, _obj("configmaps", {}), upstream="NAME"),
        Case("put-other-namespace", "PUT", target, 400, _obj("configmaps", {"name": "target", "namespace": "default"}),
             upstream="NAME"),
        Case("put-other-kind", "PUT", target, 400, {**_obj("configmaps", {"name": "target"}), "kind": "Secret"}),
        Case("put-text", "PUT", target, 415, orjson.dumps(_obj("configmaps", {"name": "target"})), "text/plain",
             "MEDIA"),
        Case("put-control", "PUT", target, 200, _obj("configmaps", {"name": "target"})),
    ]


_BAD_JSON_PATCHES: list[tuple[str, object, int]] = [
    ("object", {}, 400), ("list-of-numbers", [1], 400), ("string", "x", 400),
    ("no-op", [{"path": "/metadata/labels", "value": {}}], 422),
    ("unknown-op", [{"op": "frobnicate", "path": "/metadata"}], 422),
    ("path-number", [{"op": "add", "path": 5, "value": 1}], 422),
    ("path-list", [{"op": "remove", "path": ["metadata"]}], 422),
    ("from-number", [{"op": "move", "from": 5, "path": "/metadata/labels"}], 422),
    ("copy-no-from", [{"op": "copy", "path": "/metadata/labels"}], 422),
    ("add-no-value", [{"op": "add", "path": "/metadata/labels"}], 422),
    ("replace-root", [{"op": "replace", "path": "", "value": []}], 422),
    ("remove-root", [{"op": "remove", "path": ""}], 422),
    ("metadata-number", [{"op": "add", "path": "/metadata", "value": 5}], 422),
    ("labels-list", [{"op": "add", "path": "/metadata/labels", "value": ["a"]}], 422),
    ("uid-number", [{"op": "replace", "path": "/metadata/uid", "value": 5}], 422),
    ("rename", [{"op": "replace", "path": "/metadata/name", "value": "other"}], 400),
    ("move-namespace", [{"op": "replace", "path": "/metadata/namespace", "value": "default"}], 400),
    ("bad-pointer", [{"op": "add", "path": "metadata", "value": 1}], 422),
    ("too-many-ops", [{"op": "test", "path": "/kind", "value": "x"}] * 10_001, 413),
]
_BAD_MERGE_PATCHES: list[tuple[str, object, int]] = [
    ("list", [], 400), ("string", "x", 400), ("number", 5, 400),
    ("metadata-list", {"metadata": []}, 422), ("metadata-number", {"metadata": 5}, 422),
    ("labels-number", {"metadata": {"labels": {"a": 5}}}, 422), ("uid-number", {"metadata": {"uid": 5}}, 422),
    ("rv-number", {"metadata": {"resourceVersion": 5}}, 422),
    ("created-yesterday", {"metadata": {"creationTimestamp": "yesterday"}}, 422),
    ("managedFields-string", {"metadata": {"managedFields": "x"}}, 422),
    ("rename", {"metadata": {"name": "other"}}, 400), ("unname", {"metadata": {"name": None}}, 400),
    ("move-namespace", {"metadata": {"namespace": "default"}}, 400),
]


def _patch_cases() -> list[Case]:
    out = []
    for kind, path in (("configmaps", f"{CM}/target"), ("widgets", f"{WIDGETS}/target"),
                       ("deployments", f"{DEPLOY}/target")):
        intact = (("GET", path, 200),)
        for name, body, code in _BAD_JSON_PATCHES:
            out.append(Case(f"{kind}-json-patch-{name}", "PATCH", path, code, body, JSON_PATCH, "PATCH/SIZE", intact))
        for name, body, code in _BAD_MERGE_PATCHES:
            out.append(Case(f"{kind}-merge-patch-{name}", "PATCH", path, code, body, MERGE, "PATCH/NAME", intact))
        for media in ("text/plain", JSON, YAML, "application/xml"):
            out.append(Case(f"{kind}-patch-as-{media}", "PATCH", path, 415, b"{}", media, "MEDIA"))
        out.append(Case(f"{kind}-patch-no-type", "PATCH", path, 415, b"{}", None, "MEDIA"))
        out.append(Case(f"{kind}-apply", "PATCH", path, 415, b"{}", APPLY, "server-side apply is refused (docs)"))
        out.append(Case(f"{kind}-json-patch-control", "PATCH", path, 200,
                        [{"op": "add", "path": "/metadata/labels", "value": {"ok": "yes"}}], JSON_PATCH))
        out.append(Case(f"{kind}-merge-patch-control", "PATCH", path, 200, {"metadata": {"labels": {"ok": "no"}}},
                        MERGE))
    deep = _nested(100).decode()
    out.append(Case("widgets-status-deep", "PATCH", f"{WIDGETS}/target/status", 200,
                    f'{{"status":{{"a":{deep}}}}}'.encode(), MERGE, "100 levels are within the limit"))
    out.append(Case("widgets-status-deeper-by-a-second-patch", "PATCH", f"{WIDGETS}/target/status", 422, [
        {"op": "add", "path": "/status/a" + "/a" * 99 + "/b", "value": orjson.loads(_nested(100))}], JSON_PATCH,
                    "each patch is within the depth limit, what they build together is not (the emulator's limit)",
                    (("GET", WIDGETS, 200),)))
    out.append(Case("widgets-strategic", "PATCH", f"{WIDGETS}/target", 415, {}, STRATEGIC,
                    "custom resources take no strategic merge patch"))
    for kind, path in (("configmaps", f"{CM}/target"), ("deployments", f"{DEPLOY}/target")):
        for name, body, code in [
                ("unknown-directive", {"$patch": "bogus"}, 400), ("directive-number", {"metadata": {"$patch": 5}}, 400),
                ("retainKeys-string", {"$retainKeys": "x"}, 400), ("retainKeys-numbers", {"$retainKeys": [1]}, 400),
                ("order-not-list", {"metadata": {"$setElementOrder/finalizers": 5}}, 400),
                ("delete-primitive-not-list", {"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}, 400),
                ("retainKeys-mismatch", {"$retainKeys": ["data"], "metadata": {"labels": {"a": "b"}}}, 422),
                ("metadata-list", {"metadata": []}, 422), ("rename", {"metadata": {"name": "other"}}, 400)]:
            out.append(Case(f"{kind}-strategic-{name}", "PATCH", path, code, body, STRATEGIC, "PATCH (an unknown "
                            "$patch is a 500 upstream, interpretStrategicMergePatchError's default; 400 here)"))
    deploy = f"{DEPLOY}/target"
    for name, body, media, code, params in [
            ("replicas-string", {"spec": {"replicas": "x"}}, MERGE, 422, {}),
            ("replicas-int32", {"spec": {"replicas": 2 ** 31}}, MERGE, 422, {}),
            ("replicas-json-patch", [{"op": "replace", "path": "/spec/replicas", "value": "x"}], JSON_PATCH, 422, {}),
            ("port-string", {"spec": {"template": {"spec": {"containers": [
                {"name": "c", "ports": [{"containerPort": "x"}]}]}}}}, STRATEGIC, 422, {}),
            ("unknown-field-strict", {"spec": {"frobnicate": 1}}, MERGE, 400, {"fieldValidation": "Strict"})]:
        out.append(Case(f"deployments-patched-{name}", "PATCH", deploy, code, body, media,
                        "PATCH: the decoder refusing the patched object is 422, a strict unknown field 400",
                        (("GET", deploy, 200),), params))
    out.append(Case("deployments-strategic-item-directive", "PATCH", f"{DEPLOY}/target", 400, {"spec": {"template": {
        "spec": {"containers": [{"name": "c", "$patch": "explode"}]}}}}, STRATEGIC))
    out.append(Case("deployments-strategic-control", "PATCH", f"{DEPLOY}/target", 200, {"spec": {"template": {
        "spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}, STRATEGIC))
    return out


# --- CRDs -------------------------------------------------------------------------------------------

def _crd(plural: str, group: str = "fuzz.liveplex.io", **spec: object) -> dict:
    names = {"plural": plural, "singular": plural[:-1] if plural.endswith("s") else plural, "kind": "Gadget"}
    body = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "names": names, "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "word": {"type": "string"}}}}}}}]}}
    for key, value in spec.items():
        if key in ("names", "version"):
            target = names if key == "names" else body["spec"]["versions"][0]
            target.update(value)  # type: ignore[arg-type]
        else:
            body["spec"][key] = value
    return body


def _word_pattern(plural: str, pattern: str) -> dict:
    body = _crd(plural)
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["word"][
        "pattern"] = pattern
    return body


def _crd_cases() -> list[Case]:
    deep = _crd("deeps")
    example: dict = {}
    for _ in range(200):
        example = {"a": example}
    deep["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["example"] = example
    shadow = _crd("deployments", "apps")
    return [
        Case("crd-scope-galaxy", "POST", CRDS, 422, _crd("galaxies", scope="Galaxy"), upstream="CRD"),
        Case("crd-empty-kind", "POST", CRDS, 422, _crd("kindless", names={"kind": ""}), upstream="CRD"),
        Case("crd-shadows-apps-deployments", "POST", CRDS, 422, shadow,
             upstream="CRD: a group must be a domain with at least one dot",
             then=(("GET", f"{DEPLOY}/target", 200),)),
        Case("crd-empty-group", "POST", CRDS, 422, _crd("nogroups", "")),
        Case("crd-protected-group", "POST", CRDS, 422, _crd("things", "fuzz.k8s.io"),
             upstream="CRD: api-approved.kubernetes.io"),
        Case("crd-version-uppercase", "POST", CRDS, 422, _crd("uppers", version={"name": "V1"})),
        Case("crd-version-digit-first", "POST", CRDS, 422, _crd("digits", version={"name": "1beta"})),
        Case("crd-plural-uppercase", "POST", CRDS, 422, _crd("Gadgets")),
        Case("crd-listkind-is-kind", "POST", CRDS, 422, _crd("lists", names={"listKind": "Gadget"})),
        Case("crd-shortname", "POST", CRDS, 422, _crd("shorts", names={"shortNames": ["Bad Name"]})),
        Case("crd-pattern-unbalanced", "POST", CRDS, 422, _word_pattern("unbalanceds", "(")),
        Case("crd-pattern-backreference", "POST", CRDS, 422, _word_pattern("backrefs", r"(a)\1"),
             upstream="CRD: Go's regexp (RE2) has no backreferences"),
        Case("crd-pattern-lookbehind", "POST", CRDS, 422, _word_pattern("lookbehinds", "(?<=a)b")),
        Case("crd-property-null", "POST", CRDS, 422, {**_crd("nulls"), "spec": {**_crd("nulls")["spec"], "versions": [{
            **_crd("nulls")["spec"]["versions"][0], "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": None}}}}]}},
             upstream="CRD: a null schema decodes as an empty one, which has no type"),
        Case("crd-column-type", "POST", CRDS, 422, _crd("coltypes", version={"additionalPrinterColumns": [
            {"name": "C", "type": "x", "jsonPath": ".spec.word"}]}), upstream="CRD: ValidateCustomResourceColumnDefinition"),
        Case("crd-column-path", "POST", CRDS, 422, _crd("colpaths", version={"additionalPrinterColumns": [
            {"name": "C", "type": "string", "jsonPath": "[[["}]}), upstream="CRD: validateSimpleJSONPath"),
        Case("crd-column-no-path", "POST", CRDS, 422, _crd("colnopaths", version={"additionalPrinterColumns": [
            {"name": "C", "type": "string", "jsonPath": ""}]})),
        Case("crd-scale-path-outside-spec", "POST", CRDS, 422, _crd("scalepaths", version={"subresources": {"scale": {
            "specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"}}}),
             upstream="CRD: specReplicasPath should be a json path under .spec"),
        Case("crd-plural-number", "POST", CRDS, 400, _crd("numbers", names={"plural": 5}), upstream="DECODE"),
        Case("crd-versions-string", "POST", CRDS, 400, _crd("strings", versions="v1"), upstream="DECODE"),
        Case("crd-example-nested-200", "POST", CRDS, 400, deep, upstream="the emulator's depth limit"),
        Case("crd-catastrophic-pattern-admitted", "POST", CRDS, 201, _word_pattern("redos", "^(a+)+$"),
             upstream="RE2 compiles it and matches in linear time"),
        Case("crd-catastrophic-pattern-evaluated", "POST", "/apis/fuzz.liveplex.io/v1/namespaces/hostile/redos", 422,
             {"apiVersion": "fuzz.liveplex.io/v1", "kind": "Gadget", "metadata": {"name": "slow"},
              "spec": {"word": "a" * 5000 + "!"}}, upstream="schema pattern mismatch, answered at once"),
    ]


# --- deletions, tokens, reviews, scale, methods, selectors ------------------------------------------

def _other_cases() -> list[Case]:
    target = f"{CM}/target"
    intact = (("GET", target, 200),)
    token = f"/api/v1/namespaces/{NS}/serviceaccounts/target/token"
    review = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    scale = f"{DEPLOY}/target/scale"
    return [
        *(Case(f"delete-{name}", "DELETE", target, code, body, upstream="DELETE", then=intact) for name, body, code in [
            ("grace-string", {"gracePeriodSeconds": "x"}, 400), ("propagation-bogus", {"propagationPolicy": "Bogus"}, 422),
            ("orphan-and-propagation", {"orphanDependents": True, "propagationPolicy": "Orphan"}, 422),
            ("list", [], 400), ("string", "x", 400), ("preconditions-string", {"preconditions": "x"}, 400),
            ("dryRun-string", {"dryRun": "All"}, 400), ("grace-int64", {"gracePeriodSeconds": 2 ** 63}, 400)]),
        Case("delete-text", "DELETE", target, 415, b"{}", "text/plain", "MEDIA", intact),
        Case("delete-query-propagation", "DELETE", target, 422, params={"propagationPolicy": "Bogus"}, then=intact),
        Case("delete-query-grace", "DELETE", target, 400, params={"gracePeriodSeconds": "soon"}, then=intact),
        Case("delete-control", "DELETE", f"{CM}/as-yaml", 200, {"propagationPolicy": "Background"},
             then=(("GET", f"{CM}/as-yaml", 404),)),
        *(Case(f"token-{name}", "POST", token, code, body, upstream="TOKEN") for name, body, code in [
            ("10s", {"spec": {"expirationSeconds": 10}}, 422), ("599s", {"spec": {"expirationSeconds": 599}}, 422),
            ("2^33s", {"spec": {"expirationSeconds": 2 ** 33}}, 422),
            ("string", {"spec": {"expirationSeconds": "x"}}, 400), ("spec-string", {"spec": "x"}, 400),
            ("list", [], 400), ("audiences-string", {"spec": {"audiences": "x"}}, 400),
            ("600s", {"spec": {"expirationSeconds": 600}}, 201), ("default", {}, 201)]),
        Case("token-text", "POST", token, 415, b"{}", "text/plain", "MEDIA"),
        Case("review-spec-string", "POST", review, 400, {"spec": "x"}),
        Case("review-attributes-string", "POST", review, 400, {"spec": {"resourceAttributes": "x"}}),
        Case("review-control", "POST", review, 201, {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        Case("eviction-options-number", "POST", f"/api/v1/namespaces/{NS}/pods/target/eviction", 400,
             {"deleteOptions": 5}, then=(("GET", f"/api/v1/namespaces/{NS}/pods/target", 200),)),
        Case("eviction-list", "POST", f"/api/v1/namespaces/{NS}/pods/target/eviction", 400, []),
        Case("scale-spec-list", "PUT", scale, 400, {"spec": []}),
        Case("scale-replicas-string", "PUT", scale, 400, {"spec": {"replicas": "x"}}),
        Case("scale-replicas-int32", "PUT", scale, 400, {"spec": {"replicas": 2 ** 31}}),
        Case("scale-list", "PUT", scale, 400, []),
        Case("scale-control", "PUT", scale, 200, {"spec": {"replicas": 2}}),
        *(Case(f"method-{m}-{p}", m, p, 405, content_type=None) for m in ("OPTIONS", "TRACE")
          for p in ("/api", "/api/v1/namespaces", target)),
        Case("selector-16000-spaces", "GET", CM, 400, params={"labelSelector": "a" + " " * 16_000 + "b"}),
        Case("selector-16000-spaces-ok", "GET", CM, 200, params={"labelSelector": "a" + " " * 16_000 + "=b"}),
        Case("selector-open-set", "GET", CM, 400, params={"labelSelector": "a in ("}),
        Case("selector-bang-set", "GET", CM, 400, params={"labelSelector": "!a in (b)"}),
        Case("field-selector-no-op", "GET", CM, 400, params={"fieldSelector": "metadata.name"}),
        Case("field-selector-spaces", "GET", CM, 200, params={"fieldSelector": "metadata.name =" + " " * 16_000}),
        Case("limit-string", "GET", CM, 400, params={"limit": "all"}),
        Case("continue-garbage", "GET", CM, 400, params={"continue": "!!!"}),
        Case("watch-timeout-string", "GET", CM, 400, params={"watch": "true", "timeoutSeconds": "forever"}),
        Case("watch-rv-string", "GET", CM, 400, params={"watch": "true", "resourceVersion": "latest"}),
        *(Case(f"openapi-{n}", "GET", p, 404, content_type=None) for n, p in enumerate((
            "/openapi/v3/api", "/openapi/v3/apis", "/openapi/v3/apis/apps", "/openapi/v3/x/y/z", "/openapi/v3/api/v1/x"))),
        Case("protobuf-accept-gets-json", "GET", f"{CM}/target", 200, content_type=None,
             upstream="kubectl's Accept: protobuf first, JSON as fallback"),
    ]


CASES = _metadata_cases() + _encoding_cases() + _field_cases() + _update_cases() + _patch_cases() + _crd_cases() \
    + _other_cases()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[httpx.AsyncClient]:
    """One emulator and one keep-alive connection to it, with a `target` of every kind to patch."""
    emulator = Emulator(tmp_path_factory.mktemp("hostile") / "state", kubelet=False)
    await emulator.start()
    try:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=30.0, verify=emulator.tls(),
                                     limits=httpx.Limits(max_connections=1),
                                     headers={"Authorization": f"Bearer {emulator.admin_token}"}) as client:
            assert (await client.post(CRDS, json=WIDGET_CRD)).status_code == 201
            assert (await client.post("/api/v1/namespaces", json={"metadata": {"name": NS}})).status_code == 201
            for kind, (path, body) in KINDS.items():
                if kind != "namespaces":
                    answer = await client.post(path, json={**body, "metadata": {"name": "target"}})
                    assert answer.status_code == 201, answer.text
            yield client
    finally:
        await emulator.stop()


def _content(case: Case) -> bytes | None:
    if case.body is None:
        return None
    return case.body if isinstance(case.body, bytes) else orjson.dumps(case.body)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_hostile_request(api: httpx.AsyncClient, case: Case) -> None:
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    if case.id == "protobuf-accept-gets-json":
        headers["Accept"] = "application/vnd.kubernetes.protobuf,application/json"
    answer = await api.request(case.method, case.path, content=_content(case), headers=headers, params=case.params)
    assert answer.status_code == case.code, answer.text[:2000]
    assert answer.headers.get("connection") != "close"
    if case.reason is not None and case.code >= 400:
        status = answer.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", case.reason, case.code), status
    for method, path, code in case.then:
        assert (await api.request(method, path)).status_code == code, (method, path)


async def test_nothing_a_case_sent_poisoned_a_list_or_a_watch(api: httpx.AsyncClient) -> None:
    """Every kind still lists and watches (a stored object that cannot be served would make them 500)."""
    assert len(CASES) >= 300
    paths = [p for p, _ in KINDS.values()] + [CRDS, "/apis/fuzz.liveplex.io/v1/namespaces/hostile/redos"]
    for path in paths:
        listed = await api.get(path)
        assert listed.status_code == 200, (path, listed.text[:500])
        async with api.stream("GET", path, params={"watch": "true", "sendInitialEvents": "true",
                                                   "allowWatchBookmarks": "true"}) as watched:
            assert watched.status_code == 200, path
            async for line in watched.aiter_lines():  # every stored object, then the bookmark that ends them
                if orjson.loads(line)["type"] == "BOOKMARK":
                    break
        table = await api.get(path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        assert table.status_code == 200, path
