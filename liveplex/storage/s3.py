"""`S3Store`: objects in any S3-compatible store (AWS S3, MinIO, Ceph RGW, R2, GCS's XML API...)
through obstore (the `store-s3` extra).

Why obstore: one wheel with no Python dependencies (the Rust `object_store` crate that Apache
Arrow and DataFusion use, maintained by Development Seed), native asyncio, typed; aiobotocore would
bring botocore (~90 MB of service data) and aiohttp pins, miniopy-async is one maintainer's port of
MinIO's client. Credentials come from the environment as every AWS tool reads them
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, a web identity token, an
instance profile): the chart mounts a Secret as those variables, never a flag. Requests time out
and give up quickly (`TIMEOUT_S`, `RETRIES`): a store that is down must not hold a call's buffers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import obstore
from obstore.store import S3Store as Backend

if TYPE_CHECKING:  # TypedDicts of obstore's stubs, not importable at run time
    from obstore.store import ClientConfig, RetryConfig

from liveplex.storage.store import Entry, StoreError

TIMEOUT_S = 5.0
"""One request's budget (connect included)."""
RETRIES = 2
"""Retries of a failed request (obstore retries with backoff within `TIMEOUT_S` × 2)."""

class S3Store:
    """`store.ObjectStore` over an S3 bucket: `bucket`, optionally under `prefix`; `endpoint` for
    any S3-compatible server (http:// allowed for one inside the cluster or a test's)."""

    def __init__(self, bucket: str, endpoint: str | None = None, region: str | None = None,
                 prefix: str | None = None) -> None:
        config: dict[str, Any] = {}
        if endpoint is not None:
            config["endpoint"] = endpoint
        if region is not None:
            config["region"] = region
        options: ClientConfig = {"timeout": timedelta(seconds=TIMEOUT_S),
                                 "connect_timeout": timedelta(seconds=TIMEOUT_S)}
        if endpoint is not None and endpoint.startswith("http://"):
            options["allow_http"] = True
        retry: RetryConfig = {"max_retries": RETRIES, "retry_timeout": timedelta(seconds=2 * TIMEOUT_S)}
        self._where = (f"s3 bucket {bucket}" + (f" at {endpoint}" if endpoint else "")
                       + (f" under {prefix}" if prefix else ""))
        try:
            self._store = Backend(bucket, prefix=prefix, client_options=options, retry_config=retry, **config)
        except Exception as exc:  # obstore's configuration errors
            raise StoreError(f"cannot configure the S3 store: {exc}") from exc

    @property
    def describe(self) -> str:
        return self._where

    async def put(self, key: str, data: bytes) -> None:
        try:
            await obstore.put_async(self._store, key, data)
        except Exception as exc:
            raise StoreError(f"put {key}: {exc}") from exc

    async def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        await asyncio.gather(*(self.put(key, data) for key, data in items))

    async def get(self, key: str) -> bytes | None:
        try:
            result = await obstore.get_async(self._store, key)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise StoreError(f"get {key}: {exc}") from exc

    async def list(self, prefix: str) -> list[Entry]:
        found: list[Entry] = []
        try:
            async for batch in obstore.list(self._store, prefix=prefix, chunk_size=1000):
                found.extend(Entry(str(meta["path"]), int(meta["size"]), meta["last_modified"].timestamp())
                             for meta in batch)
        except Exception as exc:
            raise StoreError(f"list {prefix}: {exc}") from exc
        found.sort(key=lambda entry: entry.key)
        return found

    async def delete(self, keys: Sequence[str]) -> None:
        if not keys:
            return
        try:
            await obstore.delete_async(self._store, list(keys))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise StoreError(f"delete {len(keys)} objects: {exc}") from exc

    async def close(self) -> None:
        pass
