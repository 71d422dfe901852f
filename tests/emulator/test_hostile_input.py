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
- QUERY: the parameter codec (apimachinery/pkg/runtime/conversion.go): integers are strconv.ParseInt, 400
  `strconv.ParseInt: parsing "x": invalid syntax`; then ValidateListOptions, ValidateCreateOptions,
  ValidateUpdateOptions, ValidatePatchOptions -> 422 `<Kind>Options.meta.k8s.io "" is invalid`.
- FIELDS: handlers/get.go converts a field selector's labels with the kind's field label conversion:
  400 `field label not supported: x` (a kind with its own, a custom resource), `"x" is not a known field
  selector: only "metadata.name", "metadata.namespace"` (DefaultMetaV1FieldSelectorConversion).
- RV: storage's ParseResourceVersion (strconv.ParseUint): 400 here; upstream's watch cache answers a 500
  (kubernetes#113939, #139485), its etcd path a 400 `invalid resource version`.
- NEGOTIATION: handlers/negotiation NegotiateOutputMediaType -> 406 NotAcceptable; handlers/response.go
  ValidateTableOptions -> 400 `Unable to convert to Table as requested`.
- STRICT: fieldValidation=Strict decodes with sigs.k8s.io/json's strict decoder: a repeated key is
  `duplicate field "a.b"` (YAML: go-yaml's `key "a" already set in map`), 400 with the create and update
  handlers' preamble, 422 with a `patch` cause in a patch (handlers/patch.go), as unknown fields are.
- DEPTH: Go's encoding/json (and go-yaml) refuse nesting past 10,000 levels; anything within is decoded.
- METHOD: a method go-restful has no route for is 405 on a path it serves, 404 elsewhere (NotFoundHandler).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import httpx
import orjson
import pytest
import pytest_asyncio

from liveplex.emulator import Emulator
from liveplex.emulator.apiserver import deep

from .objects import WIDGET_CRD

pytestmark = pytest.mark.asyncio(loop_scope="module")

NS = "hostile"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CM = f"/api/v1/namespaces/{NS}/configmaps"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
WIDGETS = f"/apis/test.liveplex.io/v1/namespaces/{NS}/widgets"
KEEPERS = f"/apis/fuzz.liveplex.io/v1/namespaces/{NS}/keepers"
"""Custom resources whose `spec` preserves unknown fields: what a body nests there is kept."""
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
    message: str = ""
    """Words the Status message must hold (the field it names, upstream's wording)."""
    causes: tuple[str, ...] | None = None
    """Exactly the fields `details.causes` names, in order, when given."""
    answer: Mapping[str, object] | None = None
    """Fields a successful answer must hold (a subset, nested)."""
    accept: str | None = None

    @property
    def reason(self) -> str | None:
        return {400: "BadRequest", 405: "MethodNotAllowed", 406: "NotAcceptable", 413: "RequestEntityTooLarge",
                415: "UnsupportedMediaType", 422: "Invalid", 404: "NotFound"}.get(self.code)


def _obj(kind: str, metadata: object, **extra: object) -> dict:
    return {**KINDS[kind][1], "metadata": metadata, **extra}


def _nested(depth: int) -> bytes:
    """`depth` objects, each the only value of the next: `_nested(1)` is `{"a":{}}`, two levels."""
    return b'{"a":' * depth + b"{}" + b"}" * depth


def _keeper(name: str, spec: bytes) -> bytes:
    """A keeper whose `spec` is `spec`: the object nests one level more than `spec` does."""
    return b'{"apiVersion":"fuzz.liveplex.io/v1","kind":"Gadget","metadata":{"name":"%s"},"spec":%s}' % (
        name.encode(), spec)


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
        *(Case(f"depth-{levels}-preserved", "POST", KEEPERS, 201, _keeper(f"deep{levels}", _nested(levels - 2)),
               upstream="DEPTH: a preserve-unknown-fields subtree keeps it all", then=(
                   ("GET", f"{KEEPERS}/deep{levels}", 200),)) for levels in (130, 300, 10_000)),
        Case("depth-10001-json", "POST", KEEPERS, 400, _keeper("deep10001", _nested(9_999)), upstream="DEPTH",
             message="deeper than 10000 levels"),
        Case("depth-300-yaml-preserved", "POST", KEEPERS, 201, b"metadata: {name: deepyaml}\nspec: "
             + b"{a: " * 298 + b"{}" + b"}" * 298, YAML, "DEPTH (go-yaml's limit too)"),
        Case("depth-5000-yaml-sequences", "POST", KEEPERS, 201, b"metadata: {name: deepseqs}\nspec: {a: "
             + b"[" * 5_000 + b"]" * 5_000 + b"}", YAML, "DEPTH; PyYAML's own scanner took 3 s for these"),
        Case("depth-10001-yaml", "POST", KEEPERS, 400, b"metadata: {name: deepyaml2}\nspec: "
             + b"{a: " * 9_999 + b"{}" + b"}" * 9_999, YAML, "DEPTH", message="nested deeper than 10000 levels"),
        Case("depth-2000-pruned", "POST", WIDGETS, 201, b'{"metadata":{"name":"deep"},"spec":' + _nested(2000) + b"}",
             upstream="DEPTH: a field the schema does not declare is dropped"),
        Case("depth-240-affinity", "POST", f"/api/v1/namespaces/{NS}/pods", 201, orjson.loads(
            b'{"metadata":{"name":"deep"},"spec":{"containers":[{"name":"c","image":"i"}],"affinity":'
            + _nested(240) + b"}}"), upstream="DEPTH: an unknown field of a built-in is dropped (Warn)"),
        Case("depth-300-yaml", "POST", CM, 400, _yaml_cm("deep", "data: " + "{a: " * 300 + "{}" + "}" * 300), YAML,
             "DECODE: data is a map of strings", message="cannot unmarshal object into Go struct field"),
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
    out.append(Case("widgets-status-deeper-by-a-second-patch", "PATCH", f"{WIDGETS}/target/status", 422,
                    b'[{"op":"add","path":"/status/a%s/b","value":%s}]' % (b"/a" * 99, _nested(9_900)), JSON_PATCH,
                    "DEPTH: each patch is within the limit, what they build together (10,003 levels) is not; the "
                    "patched object's decoding, so 422", (("GET", WIDGETS, 200),), causes=("patch",)))
    out += [Case(f"keepers-{name}", "PATCH", f"{KEEPERS}/target", 200, body, media, "DEPTH", (
        ("GET", f"{KEEPERS}/target", 200),)) for name, body, media in [
            ("merge-patch-3000-deep", b'{"spec":{"b":%s}}' % _nested(3_000), MERGE),
            ("json-patch-2000-deep", b'[{"op":"add","path":"/spec/c","value":%s}]' % _nested(2_000), JSON_PATCH)]]
    out.append(Case("configmaps-strategic-3000-deep", "PATCH", f"{CM}/target", 200,
                    b'{"x":%s}' % _nested(3_000), STRATEGIC, "DEPTH: an unknown field, dropped (Warn)"))
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
            ("unknown-field-strict", {"spec": {"frobnicate": 1}}, MERGE, 422, {"fieldValidation": "Strict"})]:
        out.append(Case(f"deployments-patched-{name}", "PATCH", deploy, code, body, media,
                        "PATCH: the decoder refusing the patched object, strict errors too, is 422 with a `patch` "
                        "cause", (("GET", deploy, 200),), params, causes=("patch",)))
    out.append(Case("deployments-strategic-item-directive", "PATCH", f"{DEPLOY}/target", 400, {"spec": {"template": {
        "spec": {"containers": [{"name": "c", "$patch": "explode"}]}}}}, STRATEGIC))
    out.append(Case("deployments-strategic-control", "PATCH", f"{DEPLOY}/target", 200, {"spec": {"template": {
        "spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}}, STRATEGIC))
    return out + _kind_cases() + _containers_cases()


def _kind_cases() -> list[Case]:
    """Patches that make the object another kind: a merge or JSON patch's result is decoded by its own
    kind (422), a strategic one into the stored type (its kind is kept)."""
    out = []
    for kind, path, other in (("configmaps", f"{CM}/target", "Secret"), ("deployments", f"{DEPLOY}/target",
                                                                          "StatefulSet")):
        for media, body in ((MERGE, {"kind": other}), (JSON_PATCH, [{"op": "replace", "path": "/kind",
                                                                      "value": other}])):
            out.append(Case(f"{kind}-{media.split('/')[1]}-kind-{other}", "PATCH", path, 422, body, media,
                            "PATCH: converting the other kind to the stored one fails, 422 with a `patch` cause",
                            (("GET", path, 200),), causes=("patch",), message="unknown conversion"))
        out.append(Case(f"{kind}-strategic-kind-{other}", "PATCH", path, 200, {"kind": other}, STRATEGIC,
                        "PATCH: a strategic patch decodes into the stored type, whose kind it keeps",
                        answer={"kind": KINDS[kind][1]["kind"]}))
    out += [
        Case("configmaps-merge-apiVersion-v2", "PATCH", f"{CM}/target", 422, {"apiVersion": "v2"}, MERGE,
             "PATCH: no ConfigMap is registered in v2", causes=("patch",), message='no kind "ConfigMap"'),
        Case("widgets-merge-kind", "PATCH", f"{WIDGETS}/target", 422, {"kind": "Gadget"}, MERGE,
             "customresource validator ValidateTypeMeta", (("GET", f"{WIDGETS}/target", 200),), causes=("kind",),
             message='kind: Invalid value: "Gadget": must be Widget'),
        Case("widgets-merge-apiVersion", "PATCH", f"{WIDGETS}/target", 422, {"apiVersion": "test.liveplex.io/v2"},
             MERGE, "ValidateTypeMeta", causes=("apiVersion",), message="must be test.liveplex.io/v1"),
        Case("widgets-json-patch-kind", "PATCH", f"{WIDGETS}/target", 422,
             [{"op": "replace", "path": "/kind", "value": "Widgets"}], JSON_PATCH, "ValidateTypeMeta",
             causes=("kind",)),
    ]
    return out


def _containers_patch(containers: object) -> dict:
    return {"spec": {"template": {"spec": {"containers": containers}}}}


def _containers_cases() -> list[Case]:
    """Strategic `$patch` directives on a Deployment's containers, which validation requires."""
    patch = _containers_patch
    return [
        *(Case(f"deployments-strategic-{name}", "PATCH", f"{DEPLOY}/target", 422, patch(containers), STRATEGIC,
               "ValidatePodSpec: spec.template.spec.containers Required value, once", (("GET", f"{DEPLOY}/target", 200),),
               causes=("spec.template.spec.containers",)) for name, containers in (
            ("delete-the-container", [{"name": "c", "$patch": "delete"}]),
            ("delete-the-list", {"$patch": "delete"}), ("replace-with-none", [{"$patch": "replace"}]))),
        Case("deployments-strategic-delete-without-key", "PATCH", f"{DEPLOY}/target", 400,
             patch([{"$patch": "delete"}]), STRATEGIC, "mergepatch ErrNoMergeKey: a 500 upstream "
             "(interpretStrategicMergePatchError's default), 400 here", message="does not contain declared merge key"),
        Case("deployments-strategic-merge-item", "PATCH", f"{DEPLOY}/target", 400,
             patch([{"name": "c", "$patch": "merge"}]), STRATEGIC, "merging lists cannot yet be specified: upstream "
             "500, 400 here", message="merging lists cannot yet be specified in the patch"),
    ]


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


def _schema_with(plural: str, key: str, value: bytes) -> bytes:
    """A CRD whose root schema's `key` is `value` (JSON text: it may nest deeper than orjson writes)."""
    body = _crd(plural)
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"][key] = "@"
    return orjson.dumps(body).replace(b'"@"', value)


KEEPER_CRD = _crd("keepers")
KEEPER_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
    "type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _crd_cases() -> list[Case]:
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
        *(Case(f"crd-example-nested-{levels}", "POST", CRDS, 201, _schema_with(plural, "example", _nested(levels - 7)),
               upstream="DEPTH: an example is any JSON") for plural, levels in (("examples", 300),
                                                                               ("farexamples", 10_000))),
        Case("crd-schema-nested-300", "POST", CRDS, 422, _schema_with("nesteds", "properties", b'{"a":' + b"".join(
            [b'{"type":"object","properties":{"a":'] * 149) + b'{"type":"string"}' + b"}}" * 149 + b"}"),
             upstream="the emulator's limit (crds.MAX_SCHEMA_DEPTH, 256): upstream takes it",
             message="must not nest deeper than 256 levels", causes=("spec.versions[0].schema.openAPIV3Schema",)),
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
             upstream="kubectl's Accept: protobuf first, JSON as fallback",
             accept="application/vnd.kubernetes.protobuf,application/json"),
    ]


STRICT = {"fieldValidation": "Strict"}


def _strict_cases() -> list[Case]:
    """Repeated keys: refused under fieldValidation=Strict, the last one kept otherwise."""
    target = f"{CM}/target"
    return [
        *(Case(f"strict-duplicate-{name}", "POST", path, 400, body, YAML if name == "yaml" else JSON, "STRICT",
               params=STRICT, message=f"strict decoding error: {words}") for name, path, body, words in [
            ("data", CM, b'{"metadata":{"name":"dup"},"data":{"a":"1","a":"2"}}', 'duplicate field "data.a"'),
            ("name", CM, b'{"metadata":{"name":"dup","name":"dup2"}}', 'duplicate field "metadata.name"'),
            ("and-unknown", CM, b'{"metadata":{"name":"dup"},"data":{},"data":{},"bogus":1}',
             'duplicate field "data", unknown field "bogus"'),
            ("in-a-list", DEPLOY, orjson.dumps(_deployment("dup")).replace(b'"name":"c"', b'"name":"c","name":"d"'),
             'duplicate field "spec.template.spec.containers[0].name"'),
            ("custom-resource", WIDGETS, b'{"metadata":{"name":"dup"},"spec":{"color":"red","color":"blue"}}',
             'duplicate field "spec.color"'),
            ("yaml", CM, _yaml_cm("dup", "data:\n  a: '1'\n  a: '2'\n"),
             'yaml: unmarshal errors:\n  line 7: key "a" already set in map')]),
        Case("strict-duplicate-yaml-type", "POST", CM, 400, _yaml_cm("dup", "data: {a: '1', a: '2'}\n"), YAML,
             params=STRICT, message='yaml: unmarshal errors:\n  line 5: key "a" already set in map'),
        Case("strict-duplicate-put", "PUT", target, 400, b'{"metadata":{"name":"target","name":"target"}}', params=STRICT,
             upstream="STRICT", message='duplicate field "metadata.name"', then=(("GET", target, 200),)),
        *(Case(f"strict-duplicate-{name}", "PATCH", path, 422, body, media, "STRICT: a patch's strict errors are 422",
               params=STRICT, causes=("patch",), message=words) for name, path, body, media, words in [
            ("merge-patch", target, b'{"data":{"x":"1","x":"2"}}', MERGE, 'duplicate field "data.x"'),
            ("strategic-patch", target, b'{"data":{"x":"1","x":"2"}}', STRATEGIC, 'duplicate field "data.x"'),
            ("json-patch", target, b'[{"op":"add","op":"add","path":"/data/y","value":"1"}]', JSON_PATCH,
             'json patch duplicate field "[0].op"'),
            ("custom-resource-patch", f"{WIDGETS}/target", b'{"spec":{"color":"red","color":"blue"}}', MERGE,
             'duplicate field "spec.color"')]),
        Case("warn-duplicate-keeps-the-last", "POST", CM, 201, b'{"metadata":{"name":"dup"},"data":{"a":"1","a":"2"}}',
             upstream="the default directive (Warn) decodes leniently: the last value", answer={"data": {"a": "2"}}),
    ]


def _query_cases() -> list[Case]:
    """Query parameters decoded and validated as upstream's, field selectors by kind, includeObject."""
    target = f"{CM}/target"
    pods = KINDS["pods"][0]
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    return [
        Case("limit-beyond-int64", "GET", CM, 400, params={"limit": str(2 ** 63)}, upstream="QUERY",
             message='strconv.ParseInt: parsing "9223372036854775808": value out of range'),
        Case("limit-spaces", "GET", CM, 400, params={"limit": " 5"}, upstream="QUERY: ParseInt takes no spaces"),
        Case("limit-negative-is-no-limit", "GET", CM, 200, params={"limit": "-1"},
             upstream="QUERY: the storage chunks only when limit > 0"),
        Case("timeout-string-on-a-list", "GET", CM, 400, params={"timeoutSeconds": "abc"},
             upstream="QUERY: a list decodes ListOptions too", message='parsing "abc": invalid syntax'),
        *(Case(f"resourceVersion-{rv}-{how}", "GET", path, 400, params=params, upstream="RV",
               message=f'resourceVersion: Invalid value: "{rv}": strconv.ParseUint') for rv in ("-1", "abc")
          for how, path, params in (("list", CM, {"resourceVersion": rv}), ("get", target, {"resourceVersion": rv}),
                                    ("watch", CM, {"watch": "true", "resourceVersion": rv}))),
        Case("resourceVersionMatch-bogus", "GET", CM, 422, params={"resourceVersionMatch": "Bogus"}, upstream="QUERY",
             causes=("resourceVersionMatch", "resourceVersionMatch"), message="ListOptions.meta.k8s.io"),
        Case("resourceVersionMatch-bogus-with-rv", "GET", CM, 422,
             params={"resourceVersion": "0", "resourceVersionMatch": "Bogus"}, causes=("resourceVersionMatch",),
             message='Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""'),
        Case("sendInitialEvents-on-a-list", "GET", CM, 422, params={"sendInitialEvents": "true"},
             causes=("sendInitialEvents",)),
        Case("watch-sendInitialEvents-without-match", "GET", CM, 422, params={"watch": "1", "sendInitialEvents": "true"},
             causes=("resourceVersionMatch",), message="sendInitialEvents requires setting resourceVersionMatch"),
        Case("continue-with-resourceVersion", "GET", CM, 400, params={"continue": "x", "resourceVersion": "5"},
             upstream="etcd3 store", message="specifying resource version is not allowed when using continue"),
        Case("field-selector-configmap-data", "GET", CM, 400, params={"fieldSelector": "data.k=v"}, upstream="FIELDS",
             message='"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'),
        Case("field-selector-watch", "GET", CM, 400, params={"watch": "true", "fieldSelector": "data.k=v"}),
        Case("field-selector-pod-bogus", "GET", pods, 400, params={"fieldSelector": "spec.bogus=x"},
             message="field label not supported: spec.bogus"),
        Case("field-selector-pod-fields", "GET", pods, 200, params={
            "fieldSelector": "spec.nodeName=x,status.phase!=Failed,spec.host=x"}, answer={"items": []}),
        Case("field-selector-custom-resource", "GET", WIDGETS, 400, params={"fieldSelector": "spec.color=red"},
             message="field label not supported: spec.color"),
        Case("field-selector-custom-resource-name", "GET", WIDGETS, 200, params={"fieldSelector": "metadata.name=x"},
             answer={"items": []}),
        Case("table-includeObject-bogus", "GET", CM, 400, params={"includeObject": "Bogus"}, accept=table,
             upstream="NEGOTIATION", message="Unable to convert to Table as requested: includeObject: Invalid value"),
        Case("table-includeObject-bogus-get", "GET", target, 400, params={"includeObject": "Bogus"}, accept=table),
        Case("table-includeObject-none", "GET", target, 200, params={"includeObject": "None"}, accept=table,
             answer={"kind": "Table"}),
        Case("includeObject-without-a-table", "GET", target, 200, params={"includeObject": "Bogus"},
             upstream="NEGOTIATION: TableOptions are read for a Table only"),
        Case("fieldValidation-bogus-create", "POST", CM, 422, _obj("configmaps", {"name": "fv"}),
             params={"fieldValidation": "Bogus"}, upstream="QUERY", causes=("fieldValidation",),
             message='CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus"',
             then=(("GET", f"{CM}/fv", 404),)),
        Case("fieldValidation-bogus-update", "PUT", target, 422, _obj("configmaps", {"name": "target"}),
             params={"fieldValidation": "Bogus"}, causes=("fieldValidation",), message="UpdateOptions.meta.k8s.io"),
        Case("fieldValidation-bogus-patch", "PATCH", target, 422, {}, MERGE, params={"fieldValidation": "Bogus"},
             causes=("fieldValidation",), message="PatchOptions.meta.k8s.io"),
        Case("fieldValidation-ignore", "POST", CM, 201, _obj("configmaps", {"name": "fv-ignore"}, bogus=1),
             params={"fieldValidation": "Ignore"}),
        Case("dryRun-bogus-create", "POST", CM, 422, _obj("configmaps", {"name": "dry"}), params={"dryRun": "Bogus"},
             upstream="QUERY", causes=("dryRun",), message='dryRun: Unsupported value: []string{"Bogus"}'),
        Case("dryRun-bogus-delete", "DELETE", target, 422, params={"dryRun": "Bogus"}, causes=("dryRun",),
             then=(("GET", target, 200),)),
        Case("force-on-a-merge-patch", "PATCH", target, 422, {}, MERGE, params={"force": "true"}, causes=("force",),
             message="may not be specified for non-apply patch"),
        Case("delete-body-not-query", "POST", CM, 201, _obj("configmaps", {"name": "bodyquery"})),
        Case("delete-body-beats-query", "DELETE", f"{CM}/bodyquery", 200, {"propagationPolicy": "Background"},
             params={"propagationPolicy": "Bogus"}, upstream="handlers/delete.go reads the body when there is one, "
             "else the query", then=(("GET", f"{CM}/bodyquery", 404),)),
    ]


def _negotiation_cases() -> list[Case]:
    """`Accept` naming nothing the server writes, and methods the API has no use for."""
    target = f"{CM}/target"
    pods = KINDS["pods"][0]
    return [
        *(Case(f"accept-html-{name}", method, path, 406, body, accept="text/html", upstream="NEGOTIATION",
               message="only the following media types are accepted: application/json, application/yaml, "
                       "application/vnd.kubernetes.protobuf") for name, method, path, body in [
            ("get", "GET", target, None), ("list", "GET", CM, None), ("discovery", "GET", "/api/v1", None),
            ("create", "POST", CM, _obj("configmaps", {"name": "html"}))]),
        Case("accept-other-conversion", "GET", target, 406, accept="application/json;as=Secret;v=v1;g=meta.k8s.io"),
        Case("accept-protobuf-custom-resource", "GET", f"{WIDGETS}/target", 406,
             accept="application/vnd.kubernetes.protobuf", upstream="NEGOTIATION: a custom resource's own objects "
             "are JSON or YAML (its StandardSerializers)"),
        Case("accept-html-or-any", "GET", target, 200, accept="text/html, */*;q=0.8", answer={"kind": "ConfigMap"}),
        Case("accept-yaml-gets-json", "GET", target, 200, accept="application/yaml", answer={"kind": "ConfigMap"},
             upstream="NEGOTIATION accepts it; the emulator writes JSON"),
        *(Case(f"method-{m}-{p}", m, p, 405, content_type=None, upstream="METHOD")
          for m in ("FOO", "PROPFIND") for p in ("/api", "/api/v1/namespaces", target)),
        Case("method-FOO-unknown-path", "FOO", "/nope", 404, content_type=None, upstream="METHOD"),
        Case("method-OPTIONS-unknown-resource", "OPTIONS", f"/apis/nope.io/v1/namespaces/{NS}/things", 404,
             content_type=None),
        Case("method-POST-log", "POST", f"{pods}/target/log", 405, content_type=None),
        Case("method-GET-token", "GET", f"/api/v1/namespaces/{NS}/serviceaccounts/target/token", 405),
    ]


def _grace_cases() -> list[Case]:
    """A bound pod's deletion grace: any int64 is taken (upstream's timestamp arithmetic wraps), what
    ParseInt cannot read is 400, a negative one is 1 s."""
    pods = KINDS["pods"][0]
    bound = _obj("pods", {"name": "bound"}, spec={"nodeName": "liveplex-emulator", "containers": [_CONTAINER]})
    return [
        Case("grace-pod-bound", "POST", pods, 201, bound),
        Case("grace-int64-max", "DELETE", f"{pods}/bound", 200, params={"gracePeriodSeconds": str(2 ** 63 - 1)},
             upstream="registry/rest BeforeDelete and the pod strategy take any int64; now + time.Duration wraps",
             answer={"metadata": {"deletionGracePeriodSeconds": 2 ** 63 - 1}}, then=(("GET", f"{pods}/bound", 200),)),
        Case("grace-int64-max-in-body", "DELETE", f"{pods}/bound", 200, {"gracePeriodSeconds": 2 ** 63 - 1}),
        Case("grace-1e20", "DELETE", f"{pods}/bound", 400, params={"gracePeriodSeconds": "1e20"}, upstream="QUERY",
             message='strconv.ParseInt: parsing "1e20": invalid syntax'),
        Case("grace-beyond-int64", "DELETE", f"{pods}/bound", 400, params={"gracePeriodSeconds": str(10 ** 20)},
             message="value out of range"),
        Case("grace-negative-is-one-second", "DELETE", f"{pods}/bound", 200, params={"gracePeriodSeconds": "-5"},
             upstream="BeforeDelete: a negative grace period is 1 s", answer={
                 "metadata": {"deletionGracePeriodSeconds": 1}}),
        Case("grace-pod-evicted", "POST", pods, 201, {**bound, "metadata": {"name": "evicted"}}),
        Case("grace-int64-max-eviction", "POST", f"{pods}/evicted/eviction", 201,
             {"deleteOptions": {"gracePeriodSeconds": 2 ** 63 - 1}}, upstream="the eviction deletes with its options",
             then=(("GET", f"{pods}/evicted", 200),)),
    ]


CASES = _metadata_cases() + _encoding_cases() + _field_cases() + _update_cases() + _patch_cases() + _crd_cases() \
    + _other_cases() + _strict_cases() + _query_cases() + _negotiation_cases() + _grace_cases()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[httpx.AsyncClient]:
    """One emulator and one keep-alive connection to it, with a `target` of every kind to patch."""
    emulator = Emulator(tmp_path_factory.mktemp("hostile") / "state", kubelet=False)
    await emulator.start()
    try:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=30.0, verify=emulator.tls(),
                                     limits=httpx.Limits(max_connections=1),
                                     headers={"Authorization": f"Bearer {emulator.admin_token}"}) as client:
            for crd in (WIDGET_CRD, KEEPER_CRD):
                assert (await client.post(CRDS, json=crd)).status_code == 201
            assert (await client.post("/api/v1/namespaces", json={"metadata": {"name": NS}})).status_code == 201
            for kind, (path, body) in KINDS.items():
                if kind != "namespaces":
                    answer = await client.post(path, json={**body, "metadata": {"name": "target"}})
                    assert answer.status_code == 201, answer.text
            assert (await client.post(KEEPERS, content=_keeper("target", b"{}"))).status_code == 201
            yield client
    finally:
        await emulator.stop()


def _content(case: Case) -> bytes | None:
    if case.body is None:
        return None
    return case.body if isinstance(case.body, bytes) else orjson.dumps(case.body)


def _holds(answer: object, expected: object) -> bool:
    """Whether `answer` has all of `expected` (mappings compared as subsets, all the way down)."""
    if isinstance(expected, Mapping):
        return isinstance(answer, dict) and all(k in answer and _holds(answer[k], v) for k, v in expected.items())
    return answer == expected


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_hostile_request(api: httpx.AsyncClient, case: Case) -> None:
    headers = {"Content-Type": case.content_type} if case.content_type else {}
    if case.accept is not None:
        headers["Accept"] = case.accept
    answer = await api.request(case.method, case.path, content=_content(case), headers=headers, params=case.params)
    assert answer.status_code == case.code, answer.text[:2000]
    assert answer.headers.get("connection") != "close"
    if case.reason is not None and case.code >= 400:
        status = answer.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", case.reason, case.code), status
        assert case.message in status["message"], status["message"][:2000]
        if case.causes is not None:
            assert tuple(c.get("field") for c in status.get("details", {}).get("causes", [])) == case.causes, status
    if case.answer is not None:
        assert _holds(deep.loads(answer.content), case.answer), answer.text[:2000]
    for method, path, code in case.then:
        assert (await api.request(method, path)).status_code == code, (method, path)


async def test_a_request_head_up_to_upstream_s_1_mib_is_read(api: httpx.AsyncClient) -> None:
    """kube-apiserver's MaxHeaderBytes is 1 MiB; h11's own default would refuse past 16 KiB."""
    assert (await api.get(CM, headers={"X-Padding": "x" * 500_000})).status_code == 200


async def test_nothing_a_case_sent_poisoned_a_list_or_a_watch(api: httpx.AsyncClient) -> None:
    """Every kind still lists and watches (a stored object that cannot be served would make them 500)."""
    assert len(CASES) >= 300
    paths = [p for p, _ in KINDS.values()] + [CRDS, KEEPERS, "/apis/fuzz.liveplex.io/v1/namespaces/hostile/redos"]
    for path in paths:
        listed = await api.get(path)
        assert listed.status_code == 200, (path, listed.text[:500])
        async with api.stream("GET", path, params={"watch": "true", "sendInitialEvents": "true",
                                                   "resourceVersionMatch": "NotOlderThan",
                                                   "allowWatchBookmarks": "true"}) as watched:
            assert watched.status_code == 200, path
            async for line in watched.aiter_lines():  # every stored object, then the bookmark that ends them
                if deep.loads(line.encode())["type"] == "BOOKMARK":  # a keeper nests 10,000 levels
                    break
        table = await api.get(path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        assert table.status_code == 200, path
