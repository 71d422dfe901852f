"""The in-memory object store: every write's semantics, one global resourceVersion, a change history.

Development emulator, not for production. No I/O and no asyncio: the clock and the random source
are injected, and watchers learn about writes through synchronous listeners (which must only
enqueue; they may not write back from inside the callback).

What a write does, in one place (`_commit`): immutable metadata is kept, `/status` writes change
only `status` and main writes never change it (for types with a status subresource),
`metadata.generation` moves only when something outside `metadata` and `status` changes, a write
that changes nothing changes no resourceVersion and tells no watcher, every write passes admission
(`admission.py`: decoding, defaults, validation), and an object being deleted goes away when its last finalizer does.
The history keeps the last `history` changes; a watch from an older resourceVersion gets 410.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from liveplex.emulator.apiserver import (
    admission,
    bodies,
    builtins,
    deep,
    errors,
    kinds,
    patch,
    selectors,
    tables,
    validation,
)
from liveplex.emulator.apiserver.errors import Cause

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
ORPHAN, FOREGROUND = "orphan", "foregroundDeletion"
"""The finalizers the garbage collector acts on (Orphan and Foreground propagation)."""
PROPAGATIONS = ("Foreground", "Background", "Orphan")
"""DeleteOptions' `propagationPolicy` values."""

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE, STRATEGIC)
"""What the emulator applies; server-side apply (APPLY) is refused, not approximated."""

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
"""The alphabet of generated name suffixes and pod-template hashes (no vowels, no look-alikes)."""


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write as a watcher sees it; `object` is shared and must be treated as read-only."""

    type: str
    key: str
    object: dict
    rv: int
    previous: dict | None = None
    """The object before this change (None for ADDED): watchers with selectors need both."""

    @property
    def namespace(self) -> str:
        return self.object["metadata"].get("namespace", "")


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    grace_seconds: int | None = None
    propagation: str | None = None
    """Background (default), Foreground or Orphan."""
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False
    """`dryRun=All`: answer what the deletion would do, change nothing."""


Listener = Callable[[Change], None]


def stamp(epoch: float) -> str:
    """RFC 3339 in UTC with second precision, as kube-apiserver writes timestamps."""
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_seconds(seconds: int) -> float:
    """`time.Second * time.Duration(seconds)` as Go computes it, in seconds: the int64 count of
    nanoseconds wraps. kube-apiserver sets a deletion timestamp `now + grace` that way
    (registry/rest/delete.go BeforeDelete), so a grace of 2^63-1 s stamps now minus 1 s, where
    Python's clock would overflow."""
    return ((seconds * 1_000_000_000 + 2 ** 63) % 2 ** 64 - 2 ** 63) / 1e9


def random_suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_NAME_CHARS) for _ in range(n))


def _spec_part(rt: kinds.ResourceType, obj: dict) -> dict:
    """What `metadata.generation` tracks: all but metadata, and status where it is a subresource."""
    return {k: v for k, v in obj.items() if k != "metadata" and not (rt.status and k == "status")}


def _blocked(rt: kinds.ResourceType, obj: dict) -> bool:
    """Whether an object marked for deletion must stay: finalizers, a pod's grace, a namespace's content."""
    meta = obj["metadata"]
    return bool(meta.get("finalizers")
                or (rt.key == kinds.POD_KEY and meta.get("deletionGracePeriodSeconds"))
                or (rt.key == kinds.NAMESPACE_KEY and (obj.get("spec") or {}).get("finalizers")))


def _set_path(obj: dict, path: str, value: object) -> None:
    parts = path.lstrip(".").split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


class Store:
    """All objects of all types, keyed by (storage key, namespace, name)."""

    def __init__(self, clock: Callable[[], float], history: int = 10_000, rng: random.Random | None = None) -> None:
        self.registry = kinds.Registry()
        self.rv = 0
        self._clock = clock
        self._rng = rng or random.Random()
        self._objects: dict[str, dict[tuple[str, str], dict]] = defaultdict(dict)
        self._history: deque[Change] = deque(maxlen=history)
        self._compacted = 0
        """The newest resourceVersion no longer in the history."""
        self._listeners: list[Listener] = []
        self._cluster_ips = itertools.count(1)

    # --- reads ------------------------------------------------------------------------------------

    def now(self) -> float:
        return self._clock()

    def get(self, rt: kinds.ResourceType, namespace: str, name: str) -> dict:
        obj = self._objects[rt.key].get((namespace if rt.namespaced else "", name))
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return deep.clone(obj)

    def find(self, rt: kinds.ResourceType, namespace: str, name: str) -> dict | None:
        try:
            return self.get(rt, namespace, name)
        except errors.ApiError:
            return None

    def list(self, rt: kinds.ResourceType, namespace: str | None = None, labels: selectors.Selector = (),
             fields: tuple[selectors.FieldRequirement, ...] = ()) -> tuple[list[dict], int]:
        """Matching objects sorted by namespace and name, and the resourceVersion the list is as of."""
        items = [deep.clone(o) for (ns, _), o in sorted(self._objects[rt.key].items())
                 if (namespace is None or ns == namespace) and selectors.matches_labels(labels, o)
                 and selectors.matches_fields(fields, o)]
        return items, self.rv

    def snapshot(self) -> list[tuple[kinds.ResourceType, dict]]:
        """Every object with its type, not copied: for controllers that only read (must not mutate)."""
        out = []
        for key, objects in self._objects.items():
            rt = self.registry.find_key(key)
            if rt is not None:
                out += [(rt, obj) for obj in objects.values()]
        return out

    def changes_since(self, rv: int) -> list[Change]:
        """Every change after `rv`, oldest first; 410 Gone when some of them are no longer kept."""
        if rv < self._compacted:
            raise errors.gone(rv, self._compacted + 1)
        return [c for c in self._history if c.rv > rv]

    def changed_since(self, rt: kinds.ResourceType, rv: int) -> bool:
        """Whether an object of `rt` changed after `rv` (True when the history no longer tells)."""
        try:
            return any(c.key == rt.key for c in self.changes_since(rv))
        except errors.ApiError:
            return True

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    # --- writes -----------------------------------------------------------------------------------

    def create(self, rt: kinds.ResourceType, namespace: str, body: dict, validation: str = "Strict",
               dry_run: bool = False, strict: tuple[str, ...] = ()) -> dict:
        """Create `body`; with `dry_run`, admit it and answer what would be stored, storing nothing.
        `strict`: what a strict decoder found in the request body besides unknown fields (its repeated
        keys, `bodies.strict_errors`), refused with them under `fieldValidation=Strict`."""
        obj = deep.clone(body)
        meta = obj.setdefault("metadata", {})
        ns = namespace if rt.namespaced else ""
        if rt.namespaced:
            if meta.get("namespace", ns) != ns:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            self._check_namespace(ns)
        if rt.custom:
            crd = self._objects[kinds.CRD_KEY].get(("", f"{rt.plural}.{rt.group}"))
            if crd is not None and crd["metadata"].get("deletionTimestamp"):
                raise errors.method_not_allowed("create not allowed while custom resource definition is terminating")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate(rt, ns, meta["generateName"])
        name = meta.get("name", "")
        if not name:
            raise errors.invalid(rt.kind, rt.group, "",
                                 (Cause("metadata.name", "Required value", "FieldValueRequired"),))
        if (ns, name) in self._objects[rt.key]:
            raise errors.already_exists(rt.plural, rt.group, name)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta.update(name=name, uid=str(uuid.UUID(int=self._rng.getrandbits(128), version=4)),
                    creationTimestamp=stamp(self._clock()))
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if rt.generation:
            meta["generation"] = 1
        if rt.status:
            obj.pop("status", None)
        if rt.key == kinds.POD_KEY:
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        obj = self._admit(rt, obj, validation, strict=strict)
        if dry_run:
            return obj
        self._put(rt, ns, name, obj, ADDED)
        if rt.key == kinds.CRD_KEY:
            self._establish(obj)
        return self.get(rt, ns, name)

    def update(self, rt: kinds.ResourceType, namespace: str, name: str, body: dict, subresource: str | None = None,
               validation: str = "Strict", dry_run: bool = False, strict: tuple[str, ...] = ()) -> dict:
        """Replace the object with `body` (`strict` as for `create`)."""
        old = self.get(rt, namespace, name)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise errors.stale(rt.plural, rt.group, name)
        return self._commit(rt, old, deep.clone(body), subresource, validation, dry_run, strict)

    def patch(self, rt: kinds.ResourceType, namespace: str, name: str, content_type: str, body: object,
              subresource: str | None = None, validation: str = "Strict", dry_run: bool = False,
              strict: tuple[str, ...] = ()) -> dict:
        """Patch the object (`strict`: what a strict decoder found in the patch itself, as for `create`).
        handlers/patch.go: whatever the decoder refuses in the patched object, strict errors included,
        is 422 with a `patch` cause holding that object."""
        if content_type == APPLY:
            raise errors.apply_refused(PATCH_TYPES)
        old = self.get(rt, namespace, name)
        new = apply_patch(rt, old, content_type, body)
        try:
            bodies.check(new)  # two patches, each within the depth limit, can nest past it together
            new = admission.typed(rt, new)
            if content_type != STRATEGIC:  # a strategic patch decodes into the typed object, keeping its kind
                _same_kind(rt, self.registry, old, new)
            admission.same_object(new, name, namespace if rt.namespaced else "")
            wanted = (new.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise errors.stale(rt.plural, rt.group, name)
            return self._commit(rt, old, new, subresource, validation, dry_run, strict)
        except errors.Undecodable as exc:
            raise _refused_patch(new, exc.why) from None

    def delete(self, rt: kinds.ResourceType, namespace: str, name: str,
               options: DeleteOptions = DeleteOptions()) -> dict:
        old = self.get(rt, namespace, name)
        meta = old["metadata"]
        if options.uid and options.uid != meta["uid"]:
            raise errors.conflict(rt.plural, rt.group, name, f"Precondition failed: UID in precondition: "
                                                            f"{options.uid}, UID in object meta: {meta['uid']}")
        if options.resource_version and options.resource_version != meta["resourceVersion"]:
            raise errors.stale(rt.plural, rt.group, name)
        new = deep.clone(old)
        new_meta = new["metadata"]
        finalizers = list(new_meta.get("finalizers") or [])
        if options.propagation in ("Orphan", "Foreground"):
            extra = ORPHAN if options.propagation == "Orphan" else FOREGROUND
            finalizers += [extra] if extra not in finalizers else []
        if finalizers:
            new_meta["finalizers"] = finalizers
        if rt.key == kinds.NAMESPACE_KEY:
            new.setdefault("status", {})["phase"] = "Terminating"
        grace = self._grace(rt, old, options)
        if "deletionTimestamp" not in new_meta or grace < new_meta.get("deletionGracePeriodSeconds", 0):
            new_meta["deletionTimestamp"] = stamp(self._clock() + go_seconds(grace))
            new_meta["deletionGracePeriodSeconds"] = grace
            if rt.generation:
                new_meta["generation"] = new_meta.get("generation", 1) + 1
        if options.dry_run:
            return new
        if not _blocked(rt, new):
            self._remove(rt, new)
            return new
        return self._write(rt, old, new)

    def finalize_namespace(self, name: str) -> None:
        """The namespace controller's last step: the namespace is empty, remove it."""
        rt = self.registry.by_key(kinds.NAMESPACE_KEY)
        obj = self.find(rt, "", name)
        if obj is not None and obj["metadata"].get("deletionTimestamp"):
            obj["spec"]["finalizers"] = []
            if _blocked(rt, obj):
                self._put(rt, "", name, obj, MODIFIED)
            else:
                self._remove(rt, obj)

    # --- scale subresource ------------------------------------------------------------------------

    def get_scale(self, rt: kinds.ResourceType, namespace: str, name: str) -> dict:
        if rt.scale is None:
            raise errors.no_route(f"{rt.plural}/scale")
        return scale_of(rt.scale, self.get(rt, namespace, name))

    def update_scale(self, rt: kinds.ResourceType, namespace: str, name: str, scale: object,
                     dry_run: bool = False) -> dict:
        scale = admission.typed_as("Scale", "autoscaling", "v1", scale)
        old = self.get(rt, namespace, name)
        if rt.scale is None:
            raise errors.no_route(f"{rt.plural}/scale")
        wanted = (scale.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != old["metadata"]["resourceVersion"]:
            raise errors.stale(rt.plural, rt.group, name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", name, (Cause(
                "spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0"),))
        new = deep.clone(old)
        _set_path(new, rt.scale.spec, replicas)
        return scale_of(rt.scale, self._commit(rt, old, new, None, "Strict", dry_run))

    def patch_scale(self, rt: kinds.ResourceType, namespace: str, name: str, content_type: str, body: object,
                    dry_run: bool = False) -> dict:
        current = self.get_scale(rt, namespace, name)
        return self.update_scale(rt, namespace, name, apply_patch(None, current, content_type, body), dry_run)

    # --- internals --------------------------------------------------------------------------------

    def _generate(self, rt: kinds.ResourceType, ns: str, prefix: str) -> str:
        while True:
            name = prefix + random_suffix(self._rng)
            if (ns, name) not in self._objects[rt.key]:
                return name

    def _check_namespace(self, ns: str) -> None:
        found = self._objects[kinds.NAMESPACE_KEY].get(("", ns))
        if found is None:
            raise errors.not_found("namespaces", "", ns)
        if found["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(f'unable to create new content in namespace {ns} because it is being terminated')

    def _grace(self, rt: kinds.ResourceType, old: dict, options: DeleteOptions) -> int:
        """Pods on a node terminate gracefully; everything else goes at once (grace 0). A negative grace
        period is 1 s, as upstream's BeforeDelete and the pod strategy's CheckGracefulDelete make it."""
        if rt.key != kinds.POD_KEY or not (old.get("spec") or {}).get("nodeName"):
            return 0
        grace = options.grace_seconds
        if grace is None:
            grace = int(old["spec"].get("terminationGracePeriodSeconds", builtins.GRACE_SECONDS))
        return 1 if grace < 0 else grace

    def _cluster_ip(self) -> str:
        n = next(self._cluster_ips)
        return f"10.96.{n // 250}.{n % 250 + 1}"

    def _admit(self, rt: kinds.ResourceType, obj: dict, validation: str, old: dict | None = None,
               strict: tuple[str, ...] = ()) -> dict:
        """Decoding, defaults and validation for a write about to be stored (`admission.admit`)."""
        obj["apiVersion"] = rt.api_version(rt.preferred) if not rt.custom else obj.get(
            "apiVersion") or rt.api_version(rt.preferred)
        obj["kind"] = rt.kind
        return admission.admit(rt, obj, old, validation, self._cluster_ip, strict)

    def _commit(self, rt: kinds.ResourceType, old: dict, new: dict, subresource: str | None, validation: str,
                dry_run: bool = False, strict: tuple[str, ...] = ()) -> dict:
        """The write rules of the module docstring, then `_write`."""
        if subresource == "status":
            result = deep.clone(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        else:
            result = new
            meta = result.setdefault("metadata", {})
            for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"):
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
                else:
                    meta.pop(key, None)
            if rt.status:
                if "status" in old:
                    result["status"] = old["status"]
                else:
                    result.pop("status", None)
        result["metadata"].pop("managedFields", None)
        result = self._admit(rt, result, validation, old, strict)
        if rt.generation and not deep.equal(_spec_part(rt, result), _spec_part(rt, old)):
            result["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if dry_run:
            result["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            return result
        return self._write(rt, old, result)

    def _write(self, rt: kinds.ResourceType, old: dict, new: dict) -> dict:
        meta = new["metadata"]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if deep.equal(new, old):
            return new
        ns, name = meta.get("namespace", ""), meta["name"]
        if meta.get("deletionTimestamp") and not _blocked(rt, new):
            self._remove(rt, new)
            return new
        self._put(rt, ns, name, new, MODIFIED)
        if rt.key == kinds.CRD_KEY:
            self._establish(new)
        return self.get(rt, ns, name)

    def _put(self, rt: kinds.ResourceType, ns: str, name: str, obj: dict, kind: str) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        previous = self._objects[rt.key].get((ns, name))
        self._objects[rt.key][(ns, name)] = obj
        self._emit(Change(kind, rt.key, deep.clone(obj), self.rv, previous))

    def _remove(self, rt: kinds.ResourceType, obj: dict) -> None:
        meta = obj["metadata"]
        previous = self._objects[rt.key].pop((meta.get("namespace", ""), meta["name"]), None)
        if previous is None:
            return
        self.rv += 1
        gone = deep.clone(obj)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._emit(Change(DELETED, rt.key, gone, self.rv, previous))
        if rt.key == kinds.CRD_KEY:
            custom = kinds.from_crd(obj)
            for item in list(self._objects[custom.key].values()):
                self._remove(custom, item)
            self.registry.remove(custom.key)

    def _emit(self, change: Change) -> None:
        if len(self._history) == self._history.maxlen:
            self._compacted = self._history[0].rv
        self._history.append(change)
        for listener in list(self._listeners):
            listener(change)

    def _establish(self, crd: dict) -> None:
        """Install a CRD's type and report it Established, as kube-apiserver does within a moment."""
        self.registry.install(kinds.from_crd(crd))
        rt = self.registry.by_key(kinds.CRD_KEY)
        ns_names = crd["spec"]["names"]
        status = {
            "acceptedNames": {k: v for k, v in ns_names.items()},
            "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m,
                 "lastTransitionTime": crd["metadata"]["creationTimestamp"]}
                for t, r, m in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                                ("Established", "InitialNamesAccepted", "the initial names have been accepted"))],
        }
        if crd.get("status") != status:
            current = self._objects[rt.key][("", crd["metadata"]["name"])]
            self._put(rt, "", crd["metadata"]["name"], dict(deep.clone(current), status=status), MODIFIED)


def scale_of(paths: kinds.ScalePaths, obj: dict) -> dict:
    """The `autoscaling/v1` Scale view of `obj` through its type's scale paths."""
    meta = obj["metadata"]
    if paths.selector is None:
        selector = selectors.render(selectors.from_label_selector((obj.get("spec") or {}).get("selector")))
    else:
        selector = (tables.json_path(obj, paths.selector) or [""])[0]
    status = {"replicas": (tables.json_path(obj, paths.status) or [0])[0] or 0}
    if selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": (tables.json_path(obj, paths.spec) or [0])[0] or 0}, "status": status}


def _refused_patch(patched: dict, why: str) -> errors.ApiError:
    """handlers/patch.go's answer to a patched object its decoder refuses: 422, the object in a `patch` cause."""
    return errors.invalid("", "", "", (validation.invalid("patch", deep.dumps(patched).decode(), why),))


def _same_kind(rt: kinds.ResourceType, registry: kinds.Registry, old: dict, new: dict) -> None:
    """A merge or JSON patch may not turn the object into another kind. Upstream decodes the patched
    JSON by its own `kind` and `apiVersion`: a built-in of another kind (or a version its kind is not
    served at) cannot be converted to the stored type, 422 with a `patch` cause (handlers/patch.go);
    a custom resource is refused by its strategy's ValidateTypeMeta, 422 naming `kind`/`apiVersion`."""
    kind, api_version = new.get("kind"), new.get("apiVersion")
    if rt.custom:
        causes = tuple(validation.invalid(field, value or "", f"must be {wanted}") for field, value, wanted in (
            ("kind", kind, rt.kind), ("apiVersion", api_version, old["apiVersion"])) if value != wanted)
        if causes:
            raise errors.invalid(rt.kind, rt.group, old["metadata"]["name"], causes)
        return
    kind, api_version = kind or rt.kind, api_version or old["apiVersion"]
    if registry.by_kind(api_version, kind) is rt:
        return
    other = registry.by_kind(api_version, kind)
    raise errors.malformed(
        f"converting ({other.api_version(api_version.rpartition('/')[2])}) {kind} to {rt.kind}: unknown conversion"
        if other is not None else f'no kind "{kind}" is registered for version "{api_version}"')


def apply_patch(rt: kinds.ResourceType | None, current: dict, content_type: str, body: object) -> dict:
    """`current` with the patch applied; strategic merge is refused for custom resources, as upstream does."""
    if content_type == MERGE:
        if not isinstance(body, dict):
            raise errors.bad_request("a merge patch must be a JSON object")
        return _object(patch.merge_patch(current, body))
    if content_type == JSON_PATCH:
        return _object(patch.json_patch(current, body))
    if content_type == STRATEGIC and not (rt is not None and rt.custom):
        if not isinstance(body, dict):
            raise errors.bad_request("a strategic merge patch must be a JSON object")
        return _object(patch.strategic_merge_patch(current, body))
    accepted = (JSON_PATCH, MERGE) if rt is not None and rt.custom else PATCH_TYPES
    raise errors.unsupported_media_type(content_type, accepted)


def _object(patched: object) -> dict:
    """A patched object that is still an object: a JSON Patch may replace the root, and a strategic
    `$patch: delete` at the top leaves nothing; that is the client's error, not a failed write."""
    if not isinstance(patched, dict):
        raise errors.unprocessable("the patch leaves no JSON object to store")
    return patched
