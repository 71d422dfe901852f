"""A real kopf 1.45 operator against the emulator: the create handler runs once and its status patch lands."""

from __future__ import annotations

import asyncio

import kopf
import pytest

from liveplex.emulator import Emulator

from .conftest import install_widgets, until
from .objects import GROUP, PLURAL, VERSION, widget


@pytest.fixture
def registry() -> kopf.OperatorRegistry:
    return kopf.OperatorRegistry()


async def test_kopf_runs_the_create_handler_once_and_its_status_lands(
        cluster: Emulator, registry: kopf.OperatorRegistry) -> None:
    widgets = install_widgets(cluster.store)
    created: list[str] = []
    later = asyncio.Event()

    @kopf.on.login(registry=registry)
    def login(**_: object) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=cluster.url, insecure=True, scheme="Bearer", token=cluster.admin_token)

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    async def on_create(name: str, spec: dict, body: kopf.Body, patch: kopf.Patch, **_: object) -> None:
        created.append(name)
        kopf.info(body, reason="Handled", message="status written")
        patch.status["replicas"] = spec["replicas"]
        patch.status["phase"] = "Handled"

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def on_event(body: kopf.Body, **_: object) -> None:
        if body.metadata.get("labels", {}).get("later") == "yes":
            later.set()

    settings = kopf.OperatorSettings()
    settings.watching.server_timeout = 1
    stop = asyncio.Event()
    operator = asyncio.create_task(kopf.operator(registry=registry, settings=settings, standalone=True,
                                                 namespaces=["default"], stop_flag=stop))
    try:
        cluster.store.create(widgets, "default", widget("w", replicas=2))
        done = await until(cluster.store, lambda: (cluster.store.get(widgets, "default", "w").get("status") or {})
                           .get("phase") == "Handled", timeout=20)
        assert done
        cluster.store.patch(widgets, "default", "w", "application/merge-patch+json",
                            {"metadata": {"labels": {"later": "yes"}}})
        await asyncio.wait_for(later.wait(), 20)
        status = cluster.store.get(widgets, "default", "w")["status"]
        assert created == ["w"]
        assert (status["replicas"], status["phase"]) == (2, "Handled")
        events = cluster.store.registry.by_key("/events")
        assert await until(cluster.store, lambda: [e for e in cluster.store.list(events, "default")[0]
                                                   if e["reason"] == "Handled"], timeout=20)
    finally:
        stop.set()
        await asyncio.wait_for(operator, 20)
