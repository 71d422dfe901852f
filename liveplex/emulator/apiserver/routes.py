"""The API server's HTTP surface: Kubernetes REST paths onto the store, watches as streamed JSON lines.

Development emulator, not for production. HTTPS (the emulator's CA). Every request is
authenticated by its bearer token (`auth.py`: 401 for a token nobody issued, and for no token
outside the public paths) and authorized by RBAC (`rbac.py`: 403 in the RBAC authorizer's words),
including the OwnerReferencesPermissionEnforcement check on `blockOwnerDeletion`;
`serviceaccounts/<name>/token` (TokenRequest) issues ServiceAccount tokens,
`selfsubjectaccessreviews` answers `kubectl auth can-i`, and `pods/<name>/eviction` deletes a pod
its PodDisruptionBudget lets go (`disruption.py`). JSON only: a protobuf body is refused with 415
and a message that says to send JSON (but for the three kubectl sends only as protobuf,
`protowire.py`); a protobuf or YAML `Accept` still gets JSON, one naming nothing the server speaks
is 406 (`options.negotiate`). Query parameters are decoded and validated as upstream's are
(`options.py`). `dryRun=All` admits a write and answers it without storing it; `limit`/`continue`
chunk lists (`paging.py`). Any method reaches the handler (uvicorn serves it with h11, which takes
any token as a method): one the API has no use for is 405 on a path it serves, 404 elsewhere.
`parse_path` is pure; `Api` is the ASGI shell around a `storage.Store`.

Watches: without a resourceVersion (or with "0") a watch starts with a synthetic ADDED per existing
object (`sendInitialEvents` decides when it is given, and ends them with a bookmark); with one it
resumes strictly after it, from the store's history, and answers a single ERROR
event carrying a 410 Status when that history no longer reaches back. Selector watches see an
object that stops matching as DELETED and one that starts matching as ADDED. Not supported:
protobuf, and the watch-list protocol beyond its closing bookmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from liveplex.emulator.apiserver import (
    admission,
    auth,
    bodies,
    deep,
    discovery,
    disruption,
    errors,
    kinds,
    options,
    paging,
    protowire,
    rbac,
    selectors,
    storage,
    tables,
    validation,
)

logger = logging.getLogger(__name__)

LogSource = Callable[[str, str, str | None, int | None], str]
"""(namespace, pod, container or None, tailLines or None) -> the log text; raises ApiError."""

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
WATCH_TIMEOUT_S = 1800
"""A watch's length when the client names no `timeoutSeconds` (kube-apiserver picks 30-60 min)."""


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource path names; `namespace` None means cluster-scoped or all namespaces."""

    group: str
    version: str
    plural: str = ""
    namespace: str | None = None
    name: str = ""
    sub: str = ""


def parse_path(path: str) -> Target | None:
    """`/apis/apps/v1/namespaces/ns/deployments/web/scale` -> Target; None if it is no API path."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return None
    rest += [""] * (3 - len(rest))
    return Target(group, version, rest[0], namespace, rest[1], rest[2])


def _dump(body: object, status: int = 200, media_type: str = "application/json") -> Response:
    return Response(deep.dumps(body), status_code=status, media_type=media_type)


def _query(request: Request) -> options.Query:
    query: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        query.setdefault(key, []).append(value)
    return query


async def _raw(request: Request) -> bytes:
    """The body, read once and never past `bodies.MAX_BYTES` (413 as soon as it is over)."""
    cached = getattr(request.state, "raw", None)
    if cached is not None:
        return cached
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > bodies.MAX_BYTES:
        raise errors.too_large(f"limit is {bodies.MAX_BYTES}")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > bodies.MAX_BYTES:
            raise errors.too_large(f"limit is {bodies.MAX_BYTES}")
    request.state.raw = bytes(raw)
    return request.state.raw


async def _payload(request: Request, accepted: tuple[str, ...]) -> object:
    """The body's JSON value (`{}` when there is none); 415 for a media type not in `accepted`."""
    raw = await _raw(request)
    media = bodies.media_type(request.headers.get("content-type", ""))
    if media not in accepted and raw.strip():
        if "protobuf" in media:
            raise errors.protobuf_refused(media)
        raise errors.unsupported_media_type(media, accepted)
    return bodies.parse(raw, media)


async def _strict_errors(request: Request, write: options.WriteOptions, prefix: str = "") -> tuple[str, ...]:
    """The strict decoder's findings in the body itself (the keys it repeats), under
    `fieldValidation=Strict` only; a JSON Patch's are prefixed `json patch`, as handlers/patch.go does."""
    if write.field_validation != options.STRICT:
        return ()
    media = bodies.media_type(request.headers.get("content-type", ""))
    return tuple(prefix + e for e in bodies.strict_errors(await _raw(request), media))


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
"""What the API serves; any other method is 405 on a path it serves."""
_ACTIONS = {"token": kinds.SERVICE_ACCOUNT_KEY, "eviction": kinds.POD_KEY}
"""POST-only subresources and the types that have them."""
_HEALTH = ("/healthz", "/livez", "/readyz")


def request_attributes(method: str, path: str, target: Target | None, watch: bool) -> rbac.Attributes:
    """What the authorizer is asked about a request (upstream's RequestInfo)."""
    if target is None or not target.plural:
        return rbac.Attributes("get" if method == "GET" else method.lower(), path=path)
    if method == "GET":
        verb = "watch" if watch else "get" if target.name else "list"
    elif method == "DELETE":
        verb = "delete" if target.name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return rbac.Attributes(verb, target.group, target.plural, target.sub, target.namespace or "", target.name)


def _versioned(rt: kinds.ResourceType, version: str, obj: dict) -> dict:
    obj["apiVersion"] = rt.api_version(version)
    return obj


def _visible(change: storage.Change, namespace: str | None, labels: selectors.Selector,
             fields: tuple[selectors.FieldRequirement, ...]) -> tuple[str, dict] | None:
    """The event a filtered watcher sees for `change`, or None (see the module docstring)."""
    def matches(obj: dict | None) -> bool:
        return obj is not None and (namespace is None or obj["metadata"].get("namespace", "") == namespace) \
            and selectors.matches_labels(labels, obj) and selectors.matches_fields(fields, obj)

    now = change.type != storage.DELETED and matches(change.object)
    was = matches(change.previous) if change.type != storage.ADDED else False
    if change.type == storage.DELETED:
        return (storage.DELETED, change.object) if was or matches(change.object) else None
    if now:
        return (storage.MODIFIED if was else storage.ADDED), change.object
    return (storage.DELETED, change.object) if was else None


def _serves(rt: kinds.ResourceType, sub: str) -> bool:
    """Whether `rt` has subresource `sub` ("" is the object or collection itself)."""
    return sub == "" or (sub == "status" and rt.status) or (sub == "scale" and rt.scale is not None) \
        or (sub == "log" and rt.key == kinds.POD_KEY) or _ACTIONS.get(sub) == rt.key


class Api:
    """The ASGI application over one store; `close()` ends every open watch."""

    def __init__(self, store: storage.Store, logs: LogSource | None = None,
                 tokens: auth.Tokens | None = None) -> None:
        self.store = store
        self.logs = logs
        self.tokens = tokens or auth.Tokens()
        self.address = "127.0.0.1"
        """host:port as advertised by `/api`; the emulator sets it once the socket is bound."""
        self._watches: set[asyncio.Queue] = set()

    def close(self) -> None:
        for queue in list(self._watches):
            queue.put_nowait(None)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI application: every HTTP request reaches `_handle`, whatever its method (a router
        would answer a method it was not told of in plain text); lifespan events are not sent."""
        if scope["type"] == "http":
            response = await self._handle(Request(scope, receive))
            await response(scope, receive, send)

    async def _handle(self, request: Request) -> Response:
        try:
            return await self._route(request)
        except errors.ApiError as exc:
            return _dump(exc.status(), exc.code)
        except Exception as exc:  # noqa: BLE001 - the last resort: a bug answers as a Status, the connection lives
            logger.exception("the emulator's API server failed on %s %s", request.method, request.url.path)
            return _dump(errors.internal(f"{type(exc).__name__}: {exc}").status(), 500)

    def policy(self) -> rbac.Policy:
        def objects(key: str) -> list[dict]:
            return self.store.list(self.store.registry.by_key(f"rbac.authorization.k8s.io/{key}"))[0]

        return rbac.Policy(roles={(r["metadata"]["namespace"], r["metadata"]["name"]): r for r in objects("roles")},
                           cluster_roles={r["metadata"]["name"]: r for r in objects("clusterroles")},
                           role_bindings=objects("rolebindings"), cluster_role_bindings=objects("clusterrolebindings"))

    def authorize(self, user: auth.User, attrs: rbac.Attributes) -> None:
        if rbac.allowed(self.policy(), user, attrs):
            return
        if not attrs.resource_request:
            raise errors.forbidden(f"forbidden: {rbac.denial(user, attrs)}")
        what = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
        named = f'{what} "{attrs.name}"' if attrs.name else what
        raise errors.forbidden(f"{named} is forbidden: {rbac.denial(user, attrs)}", attrs.resource, attrs.group,
                               attrs.name)

    def _authenticate(self, request: Request, path: str) -> auth.User:
        user = self.tokens.user(request.headers.get("authorization"))
        if user is None or (user == auth.ANONYMOUS and path not in auth.PUBLIC_PATHS):
            raise errors.unauthorized()
        return user

    async def _route(self, request: Request) -> Response:
        path = "/" + request.url.path.strip("/")
        query = _query(request)
        user = self._authenticate(request, path)
        target = parse_path(path)
        self.authorize(user, request_attributes(request.method, path, target, bool(options.flag(query, "watch"))))
        if target is None or not target.plural:
            response = self._document(path, target, request.headers.get("accept", ""))
            if request.method not in ("GET", "HEAD") and path not in _HEALTH:  # a health check takes any method
                raise errors.method_not_allowed()
            return response
        rt = self.store.registry.lookup(target.group, target.version, target.plural)
        if rt is None or (target.namespace is not None and not rt.namespaced) or not _serves(rt, target.sub):
            raise errors.no_route(path)
        if request.method not in _METHODS:  # go-restful's 405, in apiserver's serviceErrorHandler's words
            raise errors.method_not_allowed()
        namespace = target.namespace or ""
        if target.sub == "log":
            if request.method != "GET":
                raise errors.method_not_allowed()
            return self._log(query, namespace, target.name)
        conversion = options.negotiate(request.headers.get("accept", ""), rt.custom)
        if rt.key == kinds.ACCESS_REVIEW_KEY or target.sub in _ACTIONS:
            if request.method != "POST" or (rt.key == kinds.ACCESS_REVIEW_KEY and target.name):
                raise errors.method_not_allowed()
            if rt.key == kinds.ACCESS_REVIEW_KEY:
                return await self._review(request, user)
            action = self._token if target.sub == "token" else self._evict
            return await action(request, query, namespace, target.name)
        if request.method in ("POST", "PUT", "PATCH") and target.sub == "":
            await self._check_owners(request, user, rt, target.version, namespace, target.name)
        if not target.name:
            return await self._collection(request, query, conversion, rt, target)
        if target.sub == "":
            return await self._object(request, query, conversion, rt, target.version, namespace, target.name)
        if target.sub == "status":
            return await self._status(request, query, rt, target.version, namespace, target.name)
        return await self._scale(request, query, rt, namespace, target.name)

    def _document(self, path: str, target: Target | None, accept: str) -> Response:
        """What a path outside the resources serves: version, health, OpenAPI and discovery, whose
        documents are negotiated as upstream's discovery handlers negotiate them (404 for anything else)."""
        registry = self.store.registry
        if path == "/version":
            return _dump(discovery.KUBE_VERSION)
        if path in _HEALTH:
            return PlainTextResponse("ok")
        if path == "/openapi/v3":
            return _dump(discovery.openapi_root(registry))
        if path.startswith("/openapi/v3/"):
            tail = path.removeprefix("/openapi/v3/").split("/")
            group, version = ("", tail[1]) if tail[0] == "api" and len(tail) == 2 else (
                tail[1], tail[2]) if tail[0] == "apis" and len(tail) == 3 else ("", "")
            doc = discovery.openapi_gv(registry, group, version) if version else None
        elif path in ("/api", "/apis"):
            doc = discovery.api_versions(self.address) if path == "/api" else discovery.api_groups(registry)
        elif target is None and path.startswith("/apis/") and path.count("/") == 2:
            doc = discovery.api_group(registry, path.split("/")[2])
        else:
            doc = discovery.resource_list(registry, target.group, target.version) if target is not None else None
        if doc is None:
            raise errors.no_route(path)
        if not path.startswith("/openapi/"):
            options.negotiate(accept, custom=False)
        return _dump(doc)

    # --- authentication and authorization ---------------------------------------------------------

    async def _check_owners(self, request: Request, user: auth.User, rt: kinds.ResourceType, version: str,
                            namespace: str, name: str) -> None:
        """OwnerReferencesPermissionEnforcement: setting `blockOwnerDeletion` needs `update` on the
        owner's `finalizers`."""
        body = await (self._patch_body(request, rt) if request.method == "PATCH" else self._body(request, rt, version))
        if not isinstance(body, dict):
            return
        old = self.store.find(rt, namespace, name) if name else None
        for ref in rbac.newly_blocking(old, body):
            owner = self.store.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
            if owner is None:
                continue
            attrs = rbac.Attributes("update", owner.group, owner.plural, "finalizers",
                                    namespace if owner.namespaced else "", ref.get("name", ""))
            if not rbac.allowed(self.policy(), user, attrs):
                what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
                raise errors.forbidden(
                    f'{what} "{name or (body.get("metadata") or {}).get("name", "")}" is forbidden: cannot set '
                    "blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: "
                    f"{rbac.denial(user, attrs)}", rt.plural, rt.group, name)

    async def _evict(self, request: Request, query: options.Query, namespace: str, name: str) -> Response:
        """The eviction API (`kubectl drain`): delete the pod unless its PodDisruptionBudget forbids it.
        The deletion's options are the Eviction's `deleteOptions`, its dry run the query's too."""
        dry_run = options.write_options(query, "CreateOptions").dry_run
        pods_rt = self.store.registry.by_key(kinds.POD_KEY)
        pod = self.store.get(pods_rt, namespace, name)
        body = admission.typed_as("Eviction", "policy", "v1", await self._review_body(request, protowire.eviction))
        deletion = options.delete_options(body.get("deleteOptions") or {}, {})
        pdbs, _ = self.store.list(self.store.registry.by_key("policy/poddisruptionbudgets"), namespace)
        scales = {o["metadata"]["uid"]: int((o.get("spec") or {}).get("replicas", 1))
                  for key in ("apps/replicasets", "apps/statefulsets")
                  for o in self.store.list(self.store.registry.by_key(key), namespace)[0]}
        disruption.check(pod, pdbs, self.store.list(pods_rt, namespace)[0], scales)
        self.store.delete(pods_rt, namespace, name, storage.DeleteOptions(
            deletion.grace_seconds, dry_run=dry_run or deletion.dry_run))
        return _dump({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)

    async def _review_body(self, request: Request, from_protobuf: Callable[[bytes], dict]) -> object:
        """The body of a request kubectl sends only as protobuf (these three are read from it)."""
        if "protobuf" in request.headers.get("content-type", ""):
            return from_protobuf(await _raw(request))
        return await _payload(request, bodies.OBJECT_TYPES)

    async def _token(self, request: Request, query: options.Query, namespace: str, name: str) -> Response:
        """TokenRequest (`kubectl create token`): a token that authenticates as the ServiceAccount."""
        options.write_options(query, "CreateOptions")
        self.store.get(self.store.registry.by_key(kinds.SERVICE_ACCOUNT_KEY), namespace, name)
        body = admission.typed_as("TokenRequest", "authentication.k8s.io", "v1",
                                  await self._review_body(request, protowire.token_request))
        spec = dict(body.get("spec") or {})
        seconds = spec.get("expirationSeconds")
        seconds = auth.TOKEN_SECONDS if seconds is None else seconds
        if not auth.MIN_TOKEN_SECONDS <= seconds <= auth.MAX_TOKEN_SECONDS:
            detail = (f"may not specify a duration less than {auth.MIN_TOKEN_SECONDS // 60}m0s"
                      if seconds < auth.MIN_TOKEN_SECONDS else "may not specify a duration larger than 2^32 seconds")
            raise errors.invalid("TokenRequest", "authentication.k8s.io", name, (validation.invalid(
                "spec.expirationSeconds", seconds, detail),))
        spec.update(expirationSeconds=seconds, audiences=spec.get("audiences") or ["https://kubernetes.default.svc"])
        return _dump({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                      "metadata": {"name": name, "namespace": namespace,
                                   "creationTimestamp": storage.stamp(self.store.now())},
                      "spec": spec, "status": {"token": self.tokens.issue(namespace, name),
                                               "expirationTimestamp": storage.stamp(self.store.now() + seconds)}},
                     201)

    async def _review(self, request: Request, user: auth.User) -> Response:
        """SelfSubjectAccessReview (`kubectl auth can-i`): the authorizer's answer for the caller."""
        body = admission.typed_as("SelfSubjectAccessReview", "authorization.k8s.io", "v1",
                                  await self._review_body(request, protowire.access_review))
        spec = body.get("spec") or {}
        resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if (resource is None) == (other is None):
            raise errors.invalid("SelfSubjectAccessReview", "authorization.k8s.io", "", (errors.Cause(
                "spec.resourceAttributes", "Invalid value: exactly one of nonResourceAttributes or "
                                           "resourceAttributes must be specified"),))
        if resource is not None:
            attrs = rbac.Attributes(resource.get("verb", ""), resource.get("group", ""), resource.get("resource", ""),
                                    resource.get("subresource", ""), resource.get("namespace", ""),
                                    resource.get("name", ""))
        else:
            assert other is not None  # exactly one of the two, checked above
            attrs = rbac.Attributes(other.get("verb", ""), path=other.get("path", "") or "/")
        status = {"allowed": rbac.allowed(self.policy(), user, attrs)}  # RBAC gives no reason for a denial
        return _dump({"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                      "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}, 201)

    # --- collections ------------------------------------------------------------------------------

    async def _collection(self, request: Request, query: options.Query, conversion: str, rt: kinds.ResourceType,
                          target: Target) -> Response:
        if request.method == "GET":
            listing = options.list_options(query, rt.field_labels)
            include = options.include_object(query) if conversion == options.TABLE else ""
            if listing.watch:
                return self._watch(rt, target, listing, include)
            return self._list(rt, target, listing, include)
        if request.method == "POST":
            write = options.write_options(query, "CreateOptions")
            body = await self._body(request, rt, target.version)
            created = self.store.create(rt, target.namespace or "", body, write.field_validation, write.dry_run,
                                        await _strict_errors(request, write))
            return _dump(_versioned(rt, target.version, created), 201)
        if request.method == "DELETE":
            listing = options.list_options(query, rt.field_labels)
            deletion = await self._delete_options(request, query)
            items, _ = self.store.list(rt, target.namespace, listing.labels, listing.fields)
            gone = [self.store.delete(rt, i["metadata"].get("namespace", ""), i["metadata"]["name"], deletion)
                    for i in items]
            return _dump({"kind": rt.list_kind, "apiVersion": rt.api_version(target.version),
                          "metadata": {"resourceVersion": str(self.store.rv)},
                          "items": [_versioned(rt, target.version, g) for g in gone]})
        raise errors.method_not_allowed()

    def _list(self, rt: kinds.ResourceType, target: Target, listing: options.ListOptions, include: str) -> Response:
        """`include`: the Table form's includeObject, "" for the list itself."""
        after = paging.decode(listing.continue_token) if listing.continue_token else None
        if after is not None and self.store.changed_since(rt, after.rv):
            raise paging.expired()
        items, rv = self.store.list(rt, target.namespace, listing.labels, listing.fields)
        rv = after.rv if after is not None else rv
        items, token, remaining = paging.page(items, rv, listing.limit if listing.limit > 0 else None, after)
        items = [_versioned(rt, target.version, i) for i in items]
        meta: dict = {"resourceVersion": str(rv)}
        if token:
            meta.update({"continue": token, "remainingItemCount": remaining})
        if include:
            table = tables.render(rt, items, self.store.now(), str(rv), include)
            table["metadata"].update(meta)
            return _dump(table, media_type=TABLE)
        return _dump({"kind": rt.list_kind, "apiVersion": rt.api_version(target.version), "metadata": meta,
                      "items": items})

    async def _body(self, request: Request, rt: kinds.ResourceType, version: str) -> dict:
        body = admission.typed(rt, await _payload(request, bodies.OBJECT_TYPES))
        expected = rt.api_version(version)
        if body.setdefault("apiVersion", expected) != expected or body.setdefault("kind", rt.kind) != rt.kind:
            raise errors.bad_request(f"the API version in the data ({body['apiVersion']}) does not match the "
                                     f"expected API version ({expected}), or its kind ({body['kind']}) is not "
                                     f"{rt.kind}")
        return body

    async def _patch_body(self, request: Request, rt: kinds.ResourceType, scale: bool = False) -> object:
        """A patch body in a patch media type this resource takes (server-side apply is refused)."""
        if bodies.media_type(request.headers.get("content-type", "")) == storage.APPLY:
            raise errors.apply_refused(storage.PATCH_TYPES)
        return await _payload(request, (storage.JSON_PATCH, storage.MERGE) if rt.custom and not scale
                              else storage.PATCH_TYPES)

    async def _delete_options(self, request: Request, query: options.Query) -> storage.DeleteOptions:
        """DeleteOptions, from the body if it has one (the decoder refuses a mistyped one, 400), else
        from the query (`options.delete_options`)."""
        body = admission.typed_as("DeleteOptions", "", "v1", await _payload(request, bodies.OBJECT_TYPES))
        return options.delete_options(body if (await _raw(request)).strip() else None, query)

    # --- single objects ---------------------------------------------------------------------------

    async def _object(self, request: Request, query: options.Query, conversion: str, rt: kinds.ResourceType,
                      version: str, ns: str, name: str) -> Response:
        if request.method == "GET":
            options.resource_version(options.query_text(query, "resourceVersion"))
            obj = _versioned(rt, version, self.store.get(rt, ns, name))
            if conversion == options.TABLE:
                return _dump(tables.render(rt, [obj], self.store.now(), obj["metadata"]["resourceVersion"],
                                           options.include_object(query)), media_type=TABLE)
            return _dump(obj)
        if request.method == "DELETE":
            deletion = await self._delete_options(request, query)
            return _dump(_versioned(rt, version, self.store.delete(rt, ns, name, deletion)))
        if request.method not in ("PUT", "PATCH"):
            raise errors.method_not_allowed()
        return _dump(_versioned(rt, version, await self._write(request, query, rt, version, ns, name, None)))

    async def _write(self, request: Request, query: options.Query, rt: kinds.ResourceType, version: str, ns: str,
                     name: str, subresource: str | None) -> dict:
        """A PUT or PATCH of the object or its status, with its UpdateOptions or PatchOptions."""
        if request.method == "PUT":
            write = options.write_options(query, "UpdateOptions")
            body = await self._body(request, rt, version)
            admission.same_object(body, name, ns)
            return self.store.update(rt, ns, name, body, subresource, write.field_validation, write.dry_run,
                                     await _strict_errors(request, write))
        write = options.write_options(query, "PatchOptions")
        patch = await self._patch_body(request, rt)
        kind = bodies.media_type(request.headers.get("content-type", ""))
        return self.store.patch(rt, ns, name, kind, patch, subresource, write.field_validation, write.dry_run,
                                await _strict_errors(request, write, "json patch " if kind == storage.JSON_PATCH
                                                     else ""))

    async def _status(self, request: Request, query: options.Query, rt: kinds.ResourceType, version: str, ns: str,
                      name: str) -> Response:
        if request.method == "GET":
            return _dump(_versioned(rt, version, self.store.get(rt, ns, name)))
        if request.method not in ("PUT", "PATCH"):
            raise errors.method_not_allowed()
        return _dump(_versioned(rt, version, await self._write(request, query, rt, version, ns, name, "status")))

    async def _scale(self, request: Request, query: options.Query, rt: kinds.ResourceType, ns: str,
                     name: str) -> Response:
        if request.method == "GET":
            return _dump(self.store.get_scale(rt, ns, name))
        if request.method == "PUT":
            dry_run = options.write_options(query, "UpdateOptions").dry_run
            return _dump(self.store.update_scale(rt, ns, name, await _payload(request, bodies.OBJECT_TYPES), dry_run))
        if request.method == "PATCH":
            dry_run = options.write_options(query, "PatchOptions").dry_run
            body = await self._patch_body(request, rt, scale=True)
            kind = bodies.media_type(request.headers.get("content-type", ""))
            return _dump(self.store.patch_scale(rt, ns, name, kind, body, dry_run))
        raise errors.method_not_allowed()

    def _log(self, query: options.Query, ns: str, name: str) -> Response:
        if self.logs is None:
            raise errors.bad_request("this emulator runs no kubelet, so pods have no logs")
        container = options.query_text(query, "container") or None
        if container is not None and validation.dns1123_label(container):
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        tail = options.query_int(query, "tailLines")
        if tail is not None and tail < 0:
            raise errors.invalid("PodLogOptions", "", name, (validation.invalid(
                "tailLines", tail, "must be greater than or equal to 0"),))
        return PlainTextResponse(self.logs(ns, name, container, tail))

    # --- watches ----------------------------------------------------------------------------------

    def _watch(self, rt: kinds.ResourceType, target: Target, listing: options.ListOptions, include: str) -> Response:
        """`include`: the Table form's includeObject, "" for the objects themselves. Initial events
        (a synthetic ADDED per object) come when `sendInitialEvents` asks for them or, when it is
        absent, for a watch from no resourceVersion (or "0"); otherwise the watch resumes after it."""
        timeout = listing.timeout or WATCH_TIMEOUT_S
        labels, fields = listing.labels, listing.fields
        since = listing.resource_version
        initial = listing.initial_events if listing.initial_events is not None else since in ("", "0")
        queue: asyncio.Queue[storage.Change | None] = asyncio.Queue()
        backlog: list[tuple[str, dict]] = []
        try:
            if initial:
                items, _ = self.store.list(rt, target.namespace, labels, fields)
                backlog = [(storage.ADDED, i) for i in items]
            elif since not in ("", "0"):
                backlog = [seen for c in self.store.changes_since(options.resource_version(since)) if c.key == rt.key
                           and (seen := _visible(c, target.namespace, labels, fields)) is not None]
        except errors.ApiError as exc:
            if exc.code != 410:
                raise
            error = deep.dumps({"type": "ERROR", "object": exc.status()}) + b"\n"
            return Response(error, media_type="application/json")
        listener = queue.put_nowait
        self.store.subscribe(listener)
        self._watches.add(queue)
        bookmark = bool(listing.initial_events) and listing.bookmarks
        first = [True]
        """Only a Table watch's first event carries the column definitions."""

        def line(kind: str, obj: dict) -> bytes:
            obj = _versioned(rt, target.version, dict(obj))
            if include:
                obj = tables.render(rt, [obj], self.store.now(), obj["metadata"]["resourceVersion"], include,
                                    headers=first[0])
                first[0] = False
            return deep.dumps({"type": kind, "object": obj}) + b"\n"

        async def stream() -> AsyncIterator[bytes]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            try:
                for kind, obj in backlog:
                    yield line(kind, obj)
                if bookmark:
                    yield deep.dumps({"type": "BOOKMARK", "object": {
                        "kind": rt.kind, "apiVersion": rt.api_version(target.version),
                        "metadata": {"resourceVersion": str(self.store.rv),
                                     "annotations": {"k8s.io/initial-events-end": "true"}}}}) + b"\n"
                while (left := deadline - loop.time()) > 0:
                    try:
                        async with asyncio.timeout(left):
                            change = await queue.get()
                    except TimeoutError:
                        return
                    if change is None:
                        return
                    if change.key != rt.key:
                        continue
                    seen = _visible(change, target.namespace, labels, fields)
                    if seen is not None:
                        yield line(*seen)
            finally:
                with contextlib.suppress(ValueError):
                    self.store.unsubscribe(listener)
                self._watches.discard(queue)

        return StreamingResponse(stream(), media_type=TABLE if include else "application/json")
