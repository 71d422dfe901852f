"""`DirectoryStore`: objects as files under one directory (a PVC in the chart, the default of
`liveplex up`).

A put writes a temporary file beside its target and renames it over it, so a reader (another
gateway replica sharing the volume) sees a whole object or none. File system calls run in a worker
thread: a slow disk never blocks the event loop that relays calls. Several replicas can share the
directory only on a volume they all mount (ReadWriteMany); on one machine any directory does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from liveplex.storage.store import Entry, StoreError

T = TypeVar("T")
_TEMP_SUFFIX = ".part"
"""A put's file before its rename: never listed."""


class DirectoryStore:
    """`store.ObjectStore` over a directory."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._folders: set[Path] = set()
        """Folders made by a put (each session's few), so a put costs no mkdir after its first.
        A folder deleted meanwhile is made again (`_put` retries once)."""

    @property
    def describe(self) -> str:
        return f"directory {self._root}"

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(part in ("", ".", "..") for part in parts):
            raise StoreError(f"not a storage key: {key!r}")
        return self._root.joinpath(*parts)

    async def put(self, key: str, data: bytes) -> None:
        await self._run(self._put, self._path(key), data, self._folders)

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        await self._run(self._put_many, [(self._path(key), data) for key, data in items], self._folders)

    async def get(self, key: str) -> bytes | None:
        return await self._run(self._get, self._path(key))

    async def list(self, prefix: str) -> list[Entry]:
        return await self._run(self._list, prefix)

    async def delete(self, keys: Sequence[str]) -> None:
        await self._run(self._delete, [self._path(key) for key in keys])

    async def close(self) -> None:
        pass

    @staticmethod
    async def _run(call: Callable[..., T], *args: object) -> T:
        try:
            return await asyncio.to_thread(call, *args)
        except OSError as exc:
            raise StoreError(f"{exc.strerror or exc} ({exc.filename})") from exc

    @staticmethod
    def _put(path: Path, data: bytes, folders: set[Path]) -> None:
        folder = path.parent
        if folder not in folders:
            folder.mkdir(parents=True, exist_ok=True)
            folders.add(folder)
        temp = f"{path}.{uuid.uuid4().hex}{_TEMP_SUFFIX}"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # its folder was deleted meanwhile (a sweep)
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    @classmethod
    def _put_many(cls, items: list[tuple[Path, bytes]], folders: set[Path]) -> None:
        for path, data in items:
            cls._put(path, data, folders)

    @staticmethod
    def _get(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _list(self, prefix: str) -> list[Entry]:
        base = self._root.joinpath(*prefix.rstrip("/").split("/")) if prefix.strip("/") else self._root
        found: list[Entry] = []
        for folder, _, files in os.walk(base):
            for name in files:
                if name.endswith(_TEMP_SUFFIX):
                    continue
                path = Path(folder, name)
                try:
                    stat = path.stat()
                except FileNotFoundError:  # deleted meanwhile
                    continue
                found.append(Entry(path.relative_to(self._root).as_posix(), stat.st_size, stat.st_mtime))
        found.sort(key=lambda entry: entry.key)
        return found

    def _delete(self, paths: list[Path]) -> None:
        folders: set[Path] = set()
        for path in paths:
            path.unlink(missing_ok=True)
            folders.add(path.parent)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()  # empty folders go with their last object
                self._folders.discard(folder)
            except OSError:
                pass
