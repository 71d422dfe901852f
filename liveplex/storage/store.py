"""`ObjectStore`: the interface every storage backend implements, and its one error.

Whole objects by key, no appends: S3 has none, so a stored session is written as many small
objects (`layout`), each once. Keys are `/`-separated and built by `layout` alone (never from a
client's text), so a backend may map them onto paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class StoreError(Exception):
    """The store could not do what was asked (unreachable, refused, out of space): the caller
    degrades (a call goes on unstored; a download answers 503), it never crashes on it."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored object: its key and size in bytes (what identifies it), and when it was last
    written, by the store's clock (Unix seconds): the sweep of lost calls reads it."""

    key: str
    size: int
    modified: float = field(default=0.0, compare=False)


class ObjectStore(Protocol):
    """A place for whole objects by key; every method raises `StoreError` on failure."""

    @property
    def describe(self) -> str:
        """Where it keeps objects, for logs and the banner (no credentials)."""
        ...

    async def put(self, key: str, data: bytes) -> None:
        """Write (or replace) one object, whole: a reader sees the old object or the new one."""
        ...

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """`put` each (key, data), as one request where the backend can: a stored call's flush
        writes a few objects at once, and a directory store hands them to its thread once."""
        ...

    async def get(self, key: str) -> bytes | None:
        """One object's bytes; None: no such object."""
        ...

    async def list(self, prefix: str) -> list[Entry]:
        """Every object whose key starts with `prefix` (which ends with `/`), sorted by key."""
        ...

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete these objects; a key already gone is no error."""
        ...

    async def close(self) -> None:
        """Let go of connections."""
        ...
