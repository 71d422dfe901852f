"""In-memory stand-ins for the operator's edges: the Kubernetes API, pool load, le:routes and Events.

`FakeKubeClient` keeps objects as dicts and applies merge patches per RFC 7386, like the API
server's `application/merge-patch+json`; it records every write so tests can assert a no-op.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Collection, Mapping
from typing import Any

from liveplex.emulator.apiserver.patch import merge_patch
from liveplex.operator import LoadFigures, Ref
from liveplex.operator.apply import Conflict, KubeError
from liveplex.operator.status import Transition

Obj = dict[str, Any]





class FakeKubeClient:
    def __init__(self) -> None:
        self.objects: dict[Ref, Obj] = {}
        self.writes: list[tuple[str, Ref, Obj]] = []
        self.unserved: set[tuple[str, str]] = set()
        """(api_version, kind) the server does not serve: a CRD not installed (KEDA's)."""
        self._versions = itertools.count(1)

    def put(self, obj: Mapping[str, Any]) -> Obj:
        """Store `obj` as if another party had created it (no write recorded)."""
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[Ref.of(stored)] = stored
        return stored

    async def get(self, ref: Ref) -> Obj | None:
        found = self.objects.get(ref)
        return copy.deepcopy(found) if found is not None else None

    async def create(self, obj: Mapping[str, Any]) -> Obj:
        ref = Ref.of(obj)
        self.writes.append(("create", ref, copy.deepcopy(dict(obj))))
        if ref in self.objects:
            raise Conflict(409, f"{ref.kind} {ref.name} already exists")
        return copy.deepcopy(self.put(obj))

    async def patch(self, ref: Ref, patch: Mapping[str, Any]) -> Obj:
        current = self.objects[ref]
        self.writes.append(("patch", ref, copy.deepcopy(dict(patch))))
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:  # the API server's precondition
            raise Conflict(409, f"{ref.kind} {ref.name}: the object has been modified")
        patched = merge_patch(current, patch)
        if patched.get("spec") != current.get("spec"):
            patched["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        patched["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[ref] = patched
        return copy.deepcopy(patched)

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: Mapping[str, str] | None = None) -> list[Obj]:
        if (api_version, kind) in self.unserved:
            raise KubeError(404, f"the server could not find the requested resource ({kind})")
        return [copy.deepcopy(o) for ref, o in sorted(self.objects.items(), key=lambda kv: str(kv[0]))
                if (ref.api_version, ref.kind) == (api_version, kind)
                and (namespace is None or ref.namespace == namespace)
                and all(o["metadata"].get("labels", {}).get(k) == v for k, v in (selector or {}).items())]

    async def delete(self, ref: Ref) -> None:
        self.writes.append(("delete", ref, {}))
        self.objects.pop(ref, None)


class FakeLoads:
    """Pool load by pool key; a pool set to an exception raises it (Redis down)."""

    def __init__(self, loads: Mapping[str, LoadFigures | Exception] | None = None) -> None:
        self.loads: dict[str, LoadFigures | Exception] = dict(loads or {})

    async def read(self, pool: str, subpools: int) -> LoadFigures:
        found = self.loads.get(pool, LoadFigures())
        if isinstance(found, Exception):
            raise found
        return found


class FakeRoutes:
    def __init__(self, routes: Mapping[str, str] | None = None) -> None:
        self.routes: dict[str, str] = dict(routes or {})
        self.writes = 0

    async def read(self) -> Mapping[str, str]:
        return dict(self.routes)

    async def write(self, set_: Mapping[str, str], delete: Collection[str]) -> None:
        self.writes += 1
        self.routes.update(set_)
        for model in delete:
            self.routes.pop(model, None)


class FakeEvents:
    """`handlers.Context.events`: every Event posted, as (LiveEngine name, type, reason, message)."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str, str]] = []

    def __call__(self, body: Mapping[str, Any], change: Transition) -> None:
        self.posted.append((body["metadata"]["name"], change.event_type, change.reason, change.note))
