"""Emulator fixtures: a running emulator (API server and controllers; the kubelet only where asked)."""

from __future__ import annotations

import asyncio
import logging
import pathlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import httpx
import pytest

from liveplex.emulator import Emulator
from liveplex.emulator.apiserver import kinds, routes, storage

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


@pytest.fixture(autouse=True)
def no_internal_errors(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails any test during which an emulator's API server answered a 500: its last-resort handler
    (`routes.Api._handle`) logs each one, whichever emulator, loop or thread it ran on."""
    yield
    faults = [r for when in ("setup", "call") for r in caplog.get_records(when)
              if r.name == routes.logger.name and r.levelno >= logging.ERROR]
    assert not faults, "the emulator answered 500: " + "; ".join(
        f"{r.getMessage()}: {r.exc_info[1]!r}" if r.exc_info else r.getMessage() for r in faults)


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
