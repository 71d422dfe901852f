"""Create-or-patch: the operator's one write path for children, idempotent by construction.

`create_or_patch` creates the object, or (when it exists, or creation raced and got 409) merge-patches the
full desired object onto it (`application/merge-patch+json`, RFC 7386; platform §4 rule 5).
Fields the operator does not render are never touched, except those it rendered last time and
no longer does: the last applied object is kept in an annotation (as `kubectl apply` does), and
every key it had that the desired object lacks is patched to null. When the stored object
already contains the desired one and nothing was dropped, no request is sent at all.

`KubeClient` is the small interface `create_or_patch` and the handlers use; `kube.OfficialClient`
implements it over the `kubernetes` package, the tests over a dict.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from liveplex.operator import names

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Ref:
    """Which object: kind coordinates plus its namespace (None: cluster-scoped) and name."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ref:
        meta = obj["metadata"]
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


class KubeError(Exception):
    """An API answer other than success; `status` is its HTTP status (0: no answer at all)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status

    @property
    def transient(self) -> bool:
        """Worth retrying soon: no answer, throttled, or a server-side failure."""
        return self.status in (0, 429) or self.status >= 500


class Conflict(KubeError):
    """409: the object exists already (create) or changed underneath (update)."""


class KubeClient(Protocol):
    async def get(self, ref: Ref) -> Obj | None:
        """The object, or None when it does not exist."""
        ...

    async def create(self, obj: Mapping[str, Any]) -> Obj:
        """Raises Conflict when it exists."""
        ...

    async def patch(self, ref: Ref, patch: Mapping[str, Any]) -> Obj:
        """An RFC 7386 merge patch (never a strategic merge patch)."""
        ...

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: Mapping[str, str] | None = None) -> list[Obj]:
        """Objects of a kind in `namespace` (None: every namespace), matching `selector`'s labels.
        Raises KubeError 404 when the API server does not serve the kind (KEDA not installed)."""
        ...

    async def delete(self, ref: Ref) -> None:
        """Delete the object (background propagation); one that does not exist is not an error."""
        ...


def recorded(obj: Mapping[str, Any]) -> Obj:
    """`obj` carrying itself, canonically serialised, in the last-applied annotation."""
    out = copy.deepcopy(dict(obj))
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {**meta.get("annotations", {}),
                           names.LAST_APPLIED: json.dumps(obj, sort_keys=True, separators=(",", ":"))}
    return out


def last_applied(current: Mapping[str, Any]) -> Obj | None:
    text = current.get("metadata", {}).get("annotations", {}).get(names.LAST_APPLIED)
    return json.loads(text) if text else None


def merge_patch(last: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> Obj:
    """`desired`, plus a null for every key `last` had that `desired` dropped (lists are replaced)."""
    out: Obj = copy.deepcopy(dict(desired))
    for key, before in (last or {}).items():
        if key not in desired:
            out[key] = None
        elif isinstance(before, Mapping) and isinstance(desired[key], Mapping):
            out[key] = merge_patch(before, desired[key])
    return out


def contains(current: Any, desired: Any) -> bool:
    """Whether `current` already holds every field of `desired` (the server may add defaults)."""
    if isinstance(desired, Mapping):
        return isinstance(current, Mapping) and all(k in current and contains(current[k], v)
                                                    for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(current, list) and len(current) == len(desired)
                and all(contains(c, d) for c, d in zip(current, desired)))
    return current == desired


async def create_or_patch(client: KubeClient, obj: Mapping[str, Any]) -> Obj:
    """Make the stored object match `obj`; returns it as stored. Safe to repeat and to race."""
    ref, desired = Ref.of(obj), recorded(obj)
    current = await client.get(ref)
    if current is None:
        try:
            return await client.create(desired)
        except Conflict:
            current = await client.get(ref)
            if current is None:
                raise
    last = last_applied(current)
    if last == dict(obj) and contains(current, desired):
        return current
    return await client.patch(ref, merge_patch(last, desired))
