"""`PodRecord`: what an engine pod publishes about itself in its Redis hash (platform §6.1).

The hash is flat strings; `to_hash` and `from_hash` are the only places that know its encoding
(integers in decimal, flags as `0`/`1`). The field names are the contract with `place.lua`, which
reads `addr`, `capacity`, `active` and the two flags.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from liveplex.placement import errors


@dataclass(frozen=True, slots=True)
class PodRecord:
    """One engine pod's load and identity, as of its last heartbeat or state change."""

    addr: str
    """Where a gateway dials the pod: `host:port`."""
    capacity: int
    """Sessions the pod advertises (its hard cap `maxSessions`, or less under adaptive capacity):
    on a pod that pauses, `active` plus what it admits (`wake.free_slots`: the slots kept for its
    paused sessions' wakes, and its host budget, are not offered)."""
    active: int
    """Sessions running or starting in the pod's engine batch, by its own count: what placement
    and autoscaling read as occupancy. A paused session is not among them (`paused`)."""
    draining: bool = False
    """The pod takes no new sessions (preStop `/drain`)."""
    degraded: bool = False
    """The pod runs late; placement uses it only when no healthy pod has room."""
    tick_p99_us: int = 0
    """p99 tick duration over the last window, microseconds."""
    late_permille: int = 0
    """Late ticks per thousand over the last window."""
    late_p99_us: int = 0
    """p99 tick lateness over the last window, microseconds (the operator's `Degraded` input)."""
    engine_version: str = ""
    started_ms: int = 0
    """When the pod started serving, Unix ms."""
    paused: int = 0
    """Sessions the pod holds out of its engine's batch (paused, or calls waiting for their first
    speech: docs/pause.md): in no engine slot, so not in `active`, but the pod's."""

    def to_hash(self) -> dict[str, str]:
        """The pod hash's fields and values, as `HSET` writes them."""
        return {name: _encode(getattr(self, name)) for name in _NAMES}

    @classmethod
    def from_hash(cls, mapping: Mapping[str, str]) -> PodRecord:
        """Parse a pod hash; raises `InvalidRecord` naming the first missing or malformed field."""
        values: dict[str, Any] = {}  # each decoded to its field's type by `_decode`
        for f in fields(cls):
            raw = mapping.get(f.name)
            if raw is None and f.name in ADDED:
                continue
            if raw is None:
                raise errors.InvalidRecord(f.name, None, "missing from the pod hash")
            values[f.name] = _decode(f.name, _TYPES[f.name], raw)
        return cls(**values)


    def changes(self, since: PodRecord | None) -> tuple[bool, list[str]]:
        """What a heartbeat sends: (whole, [field, value, ...]) with `PLACEMENT_FIELDS` first, always,
        then every other field when `since` is None (whole), else only those that differ from it."""
        flat: list[str] = []
        for name in _SENT_ORDER:
            value = getattr(self, name)
            if since is None or name in PLACEMENT_FIELDS or getattr(since, name) != value:
                flat += (name, _encode(value))
        return since is None, flat


ADDED = frozenset({"paused"})
"""Fields newer pods write: an older pod's hash lacks them in a rollout, read as their default."""
PLACEMENT_FIELDS = ("capacity", "active", "draining", "degraded")
"""The fields `place.lua` ranks by, sent with every heartbeat (`heartbeat.lua` reads them by position)."""

_NAMES = tuple(f.name for f in fields(PodRecord))
_SENT_ORDER = PLACEMENT_FIELDS + tuple(name for name in _NAMES if name not in PLACEMENT_FIELDS)
_TYPES: dict[str, type] = typing.get_type_hints(PodRecord)
"""Field name -> Python type (the annotations are strings under `from __future__ import annotations`)."""


def _encode(value: object) -> str:
    if value is True:
        return "1"
    if value is False:
        return "0"
    return str(value)


def _decode(name: str, kind: type, raw: str) -> object:
    if kind is str:
        return raw
    if kind is bool:
        if raw not in ("0", "1"):
            raise errors.InvalidRecord(name, raw, "a flag is 0 or 1")
        return raw == "1"
    try:
        number = int(raw)
    except ValueError:
        raise errors.InvalidRecord(name, raw, "not an integer") from None
    if number < 0:
        raise errors.InvalidRecord(name, raw, "must not be negative")
    return number
