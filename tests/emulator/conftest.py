"""Emulator fixtures: a running emulator (API server and controllers; the kubelet only where asked)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import httpx
import pytest

from liveplex.emulator import Emulator
from liveplex.emulator.apiserver import kinds, storage

from .objects import WIDGET_CRD

T = TypeVar("T")


async def until(store: storage.Store, check: Callable[[], T], timeout: float = 10.0) -> T:
    """`check()` once it is truthy, re-evaluated on every store change; fails after `timeout` seconds."""
    woken = asyncio.Event()
    listener = lambda change: woken.set()  # noqa: E731
    store.subscribe(listener)
    try:
        async with asyncio.timeout(timeout):
            while not (value := check()):
                woken.clear()
                await woken.wait()
            return value
    finally:
        store.unsubscribe(listener)


def install_widgets(store: storage.Store) -> kinds.ResourceType:
    store.create(store.registry.by_key(kinds.CRD_KEY), "", WIDGET_CRD)
    return store.registry.by_key("test.liveplex.io/widgets")


@pytest.fixture
async def cluster(tmp_path: pathlib.Path) -> AsyncIterator[Emulator]:
    emulator = Emulator(tmp_path / "state", kubelet=False)
    await emulator.start()
    yield emulator
    await emulator.stop()


@pytest.fixture
async def client(cluster: Emulator) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=cluster.url, timeout=10.0, verify=cluster.tls(),
                                 headers={"Authorization": f"Bearer {cluster.admin_token}"}) as http:
        yield http
