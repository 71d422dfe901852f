"""The API server over HTTP, one test per fidelity row of platform §11 item 4 (what kopf and kubectl rely on)."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Awaitable, Callable

import httpx
import orjson

from liveplex.emulator import Emulator

from .conftest import until
from .objects import CRD_NAME, WIDGET_CRD, widget

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/test.liveplex.io/v1/namespaces/default/widgets"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


async def _widgets(client: httpx.AsyncClient) -> None:
    assert (await client.post(CRDS, json=WIDGET_CRD)).status_code == 201


async def _eventually(get: Callable[[], Awaitable[httpx.Response]], check: Callable[[httpx.Response], object],
                      timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check(await get()):
            await asyncio.sleep(0.02)


async def _watch(client: httpx.AsyncClient, path: str, count: int, **params: str) -> list[tuple[str, str]]:
    """The first `count` events of a watch as (type, name); the watch's own timeout bounds the wait."""
    events: list[tuple[str, str]] = []
    async with client.stream("GET", path, params={"watch": "true", "timeoutSeconds": "5", **params}) as response:
        async for line in response.aiter_lines():
            event = orjson.loads(line)
            events.append((event["type"], event["object"].get("metadata", {}).get("name") or event["object"]["code"]))
            if len(events) == count:
                break
    return events


async def test_discovery_lists_a_crd_with_its_subresources_and_forgets_it_once_its_resources_are_gone(
        client: httpx.AsyncClient) -> None:
    await _widgets(client)
    groups = (await client.get("/apis")).json()
    assert "test.liveplex.io" in {g["name"] for g in groups["groups"]}
    resources = (await client.get("/apis/test.liveplex.io/v1")).json()["resources"]
    by_name = {r["name"]: r for r in resources}
    assert by_name["widgets"]["shortNames"] == ["wd"] and by_name["widgets"]["kind"] == "Widget"
    assert by_name["widgets/scale"]["kind"] == "Scale" and "widgets/status" in by_name
    assert (await client.post(WIDGETS, json=dict(widget("held"), metadata={
        "name": "held", "finalizers": ["example.com/hold"]}))).status_code == 201
    assert (await client.delete(f"{CRDS}/{CRD_NAME}")).status_code == 200
    # the finalizer controller deletes the widget, whose own finalizer holds it, and so the CRD
    await _eventually(lambda: client.get(f"{WIDGETS}/held"), lambda r: r.json()["metadata"].get("deletionTimestamp"))
    assert (await client.post(WIDGETS, json=widget("late"))).status_code == 405
    await client.patch(f"{WIDGETS}/held", json={"metadata": {"finalizers": None}}, headers=MERGE)
    await _eventually(lambda: client.get("/apis/test.liveplex.io/v1"), lambda r: r.status_code == 404)


async def test_lists_carry_kind_api_version_and_an_increasing_resource_version(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    first = (await client.get(WIDGETS)).json()
    await client.post(WIDGETS, json=widget("a"))
    second = (await client.get(WIDGETS)).json()
    assert (second["kind"], second["apiVersion"]) == ("WidgetList", "test.liveplex.io/v1")
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert [i["kind"] for i in second["items"]] == ["Widget"]


async def test_a_watch_resumes_after_its_resource_version_without_replay(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    rv = (await client.post(WIDGETS, json=widget("a"))).json()["metadata"]["resourceVersion"]
    await client.post(WIDGETS, json=widget("b"))
    await client.patch(f"{WIDGETS}/a", json={"spec": {"replicas": 3}}, headers=MERGE)
    assert await _watch(client, WIDGETS, 2, resourceVersion=rv) == [("ADDED", "b"), ("MODIFIED", "a")]
    assert await _watch(client, WIDGETS, 2) == [("ADDED", "a"), ("ADDED", "b")]


async def test_a_live_watch_sees_writes_and_a_selector_turns_leaving_into_deleted(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    rv = (await client.get(WIDGETS)).json()["metadata"]["resourceVersion"]
    watching = asyncio.create_task(_watch(client, WIDGETS, 2, resourceVersion=rv, labelSelector="tier=front"))
    await client.post(WIDGETS, json=dict(widget("a"), metadata={"name": "a", "labels": {"tier": "front"}}))
    await client.post(WIDGETS, json=widget("b"))
    await client.patch(f"{WIDGETS}/a", json={"metadata": {"labels": {"tier": "back"}}}, headers=MERGE)
    assert await watching == [("ADDED", "a"), ("DELETED", "a")]


async def test_a_watch_from_an_expired_resource_version_gets_a_410_error_event(tmp_path: pathlib.Path) -> None:
    emulator = Emulator(tmp_path, kubelet=False, history=30)
    await emulator.start()
    try:
        async with httpx.AsyncClient(base_url=emulator.url, verify=emulator.tls(),
                                     headers={"Authorization": f"Bearer {emulator.admin_token}"}) as client:
            await _widgets(client)
            rv = (await client.post(WIDGETS, json=widget("a"))).json()["metadata"]["resourceVersion"]
            for n in range(40):
                await client.post(CONFIGMAPS, json={"metadata": {"name": f"c{n}"}})
            response = await client.get(WIDGETS, params={"watch": "true", "resourceVersion": rv})
            event = orjson.loads(response.content.splitlines()[0])
            assert event["type"] == "ERROR"
            assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    finally:
        await emulator.stop()


async def test_merge_and_json_patches_apply_and_a_failed_test_is_422(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    await client.post(WIDGETS, json=dict(widget("a"), metadata={"name": "a", "labels": {"x": "1", "y": "2"}}))
    merged = await client.patch(f"{WIDGETS}/a", json={"metadata": {"labels": {"x": None}}}, headers=MERGE)
    assert merged.json()["metadata"]["labels"] == {"y": "2"}
    patched = await client.patch(f"{WIDGETS}/a", headers=JSON_PATCH, json=[
        {"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 2}])
    assert patched.json()["spec"]["replicas"] == 2
    failed = await client.patch(f"{WIDGETS}/a", headers=JSON_PATCH, json=[
        {"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 7}])
    assert failed.status_code == 422 and failed.json()["kind"] == "Status"
    assert (await client.get(f"{WIDGETS}/a")).json()["spec"]["replicas"] == 2
    strategic = await client.patch(f"{WIDGETS}/a", json={}, headers={
        "Content-Type": "application/strategic-merge-patch+json"})
    assert strategic.status_code == 415


async def test_status_and_scale_subresources_and_generation(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    await client.post(WIDGETS, json=widget("a", replicas=1))
    status = await client.patch(f"{WIDGETS}/a/status", headers=MERGE, json={
        "spec": {"replicas": 9}, "status": {"replicas": 1, "selector": "app=a"}})
    assert status.json()["spec"]["replicas"] == 1 and status.json()["metadata"]["generation"] == 1
    ignored = await client.patch(f"{WIDGETS}/a", headers=MERGE, json={"status": {"replicas": 5}})
    assert ignored.json()["status"]["replicas"] == 1
    scale = (await client.get(f"{WIDGETS}/a/scale")).json()
    assert scale["spec"] == {"replicas": 1} and scale["status"] == {"replicas": 1, "selector": "app=a"}
    put = dict(scale, spec={"replicas": 4})
    assert (await client.put(f"{WIDGETS}/a/scale", json=put)).json()["spec"]["replicas"] == 4
    assert (await client.put(f"{WIDGETS}/a/scale", json=put)).status_code == 409
    after = (await client.get(f"{WIDGETS}/a")).json()
    assert after["spec"]["replicas"] == 4 and after["metadata"]["generation"] == 2


async def test_deleting_an_owner_cascades_to_its_dependents(cluster: Emulator, client: httpx.AsyncClient) -> None:
    await _widgets(client)
    owner = (await client.post(WIDGETS, json=widget("a"))).json()
    ref = {"apiVersion": "test.liveplex.io/v1", "kind": "Widget", "name": "a", "uid": owner["metadata"]["uid"]}
    for name in ("child", "kept"):
        await client.post(CONFIGMAPS, json={"metadata": {"name": name, "ownerReferences": [ref]}})
    orphan_owner = (await client.post(WIDGETS, json=widget("b"))).json()
    await client.patch(f"{CONFIGMAPS}/kept", headers=JSON_PATCH, json=[
        {"op": "add", "path": "/metadata/ownerReferences/-", "value": dict(
            ref, name="b", uid=orphan_owner["metadata"]["uid"])}])
    assert (await client.delete(f"{WIDGETS}/a")).status_code == 200
    configmaps = cluster.store.registry.by_key("/configmaps")
    await until(cluster.store, lambda: cluster.store.find(configmaps, "default", "child") is None)
    kept = cluster.store.get(configmaps, "default", "kept")
    assert [r["name"] for r in kept["metadata"]["ownerReferences"]] == ["b"]
    await client.request("DELETE", f"{WIDGETS}/b", json={"propagationPolicy": "Orphan"})
    widgets = cluster.store.registry.by_key("test.liveplex.io/widgets")
    await until(cluster.store, lambda: cluster.store.find(widgets, "default", "b") is None)
    assert "ownerReferences" not in cluster.store.get(configmaps, "default", "kept")["metadata"]


async def test_conflicts_and_validation_come_back_as_status_objects(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    created = (await client.post(WIDGETS, json=widget("a"))).json()
    again = await client.post(WIDGETS, json=widget("a"))
    assert (again.status_code, again.json()["reason"]) == (409, "AlreadyExists")
    await client.patch(f"{WIDGETS}/a", json={"spec": {"replicas": 2}}, headers=MERGE)
    stale = await client.put(f"{WIDGETS}/a", json=created)
    assert (stale.status_code, stale.json()["reason"]) == (409, "Conflict")
    bad = await client.post(WIDGETS, json=widget("b", replicas=-2))
    assert bad.status_code == 422
    assert bad.json()["details"]["causes"][0]["field"] == "spec.replicas"


async def test_printer_columns_come_back_in_the_table_form(client: httpx.AsyncClient) -> None:
    await _widgets(client)
    await client.post(WIDGETS, json=widget("a", replicas=2, color="blue"))
    await client.patch(f"{WIDGETS}/a/status", headers=MERGE,
                       json={"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    table = (await client.get(WIDGETS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Replicas", "Color", "Ready", "Age"]
    assert table["rows"][0]["cells"][:4] == ["a", 2, "blue", "True"]


async def test_events_are_accepted(client: httpx.AsyncClient) -> None:
    event = {"metadata": {"generateName": "x."}, "involvedObject": {"kind": "Widget", "name": "a"},
             "reason": "Logging", "message": "hello", "type": "Normal"}
    assert (await client.post("/api/v1/namespaces/default/events", json=event)).status_code == 201


async def test_deleting_a_namespace_deletes_its_contents_first(cluster: Emulator, client: httpx.AsyncClient) -> None:
    await client.post("/api/v1/namespaces", json={"metadata": {"name": "doomed"}})
    await client.post("/api/v1/namespaces/doomed/configmaps", json={"metadata": {"name": "c"}})
    marked = (await client.delete("/api/v1/namespaces/doomed")).json()
    assert marked["status"]["phase"] == "Terminating"
    namespaces = cluster.store.registry.by_key("/namespaces")
    await until(cluster.store, lambda: cluster.store.find(namespaces, "", "doomed") is None)
    assert cluster.store.list(cluster.store.registry.by_key("/configmaps"), "doomed")[0] == []
