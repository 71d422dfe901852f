"""No request reaches another namespace's data through a subresource's parameters.

The API server is driven in-process (its ASGI app under httpx) over a store holding two pods in two
namespaces and a kubelet log source whose files the test writes: the kubelet builds a file path from
the `container` parameter of `pods/log`, so every way of naming a file outside the pod's own
directory is tried, by a ServiceAccount that RBAC lets read pod logs in namespace `a` only.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from liveplex.emulator.apiserver import kinds, routes, storage
from liveplex.emulator.controllers.kubelet import Kubelet

SECRET = "the log of namespace b's pod"


def _pod(containers: list[str], inits: tuple[str, ...] = ()) -> dict:
    spec: dict = {"containers": [{"name": c, "image": "busybox"} for c in containers]}
    if inits:
        spec["initContainers"] = [{"name": c, "image": "busybox"} for c in inits]
    return {"metadata": {"name": "p"}, "spec": spec}


@pytest.fixture
async def reader(tmp_path: pathlib.Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client for ServiceAccount a/reader, allowed `get pods/log` (and pods) in namespace a only."""
    store = storage.Store(time.time)
    registry = store.registry
    for ns in ("a", "b"):
        store.create(registry.by_key(kinds.NAMESPACE_KEY), "", {"metadata": {"name": ns}})
    store.create(registry.by_key(kinds.POD_KEY), "a", _pod(["c"]))
    store.create(registry.by_key(kinds.POD_KEY), "b", _pod(["c", "secret"], inits=("setup",)))
    store.create(registry.by_key("rbac.authorization.k8s.io/roles"), "a", {"metadata": {"name": "logs"}, "rules": [
        {"apiGroups": [""], "resources": ["pods", "pods/log", "pods/exec", "pods/attach", "pods/portforward",
                                          "pods/proxy"], "verbs": ["get", "create"]}]})
    store.create(registry.by_key("rbac.authorization.k8s.io/rolebindings"), "a", {
        "metadata": {"name": "logs"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                  "name": "logs"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "a"}]})
    state = tmp_path / "state"
    for ns, container, text in (("a", "c", "a's own log\n"), ("b", "c", SECRET), ("b", "secret", SECRET),
                                ("b", "setup", SECRET)):
        (state / "pods" / ns / "p").mkdir(parents=True, exist_ok=True)
        (state / "pods" / ns / "p" / f"{container}.log").write_text(text)
    (state / "outside.log").write_text(SECRET)
    api = routes.Api(store, Kubelet(store, state, "node").logs)
    token = api.tokens.issue("a", "reader")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api.app), base_url="http://emulator",
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


async def test_a_pods_own_log_is_readable(reader: httpx.AsyncClient) -> None:
    answer = await reader.get("/api/v1/namespaces/a/pods/p/log")
    assert (answer.status_code, answer.text) == (200, "a's own log\n")
    assert (await reader.get("/api/v1/namespaces/b/pods/p/log")).status_code == 403


@pytest.mark.parametrize("container", [
    "../../b/p/c", "..%2f..%2fb%2fp%2fc", "../../b/p/secret", "../../../outside", "/etc/passwd", "..", ".",
    "c/../../../b/p/c", "secret", "setup", "C", "c\x00", "c.log", "../p/c",
])
async def test_log_container_names_only_a_container_of_that_pod(reader: httpx.AsyncClient, container: str) -> None:
    """upstream (pkg/registry/core/pod/strategy.go, validateContainer): `container X is not valid for pod P`, 400."""
    answer = await reader.get("/api/v1/namespaces/a/pods/p/log", params={"container": container})
    assert SECRET not in answer.text
    assert answer.status_code == 400, answer.text
    assert answer.json()["reason"] == "BadRequest"
    assert answer.json()["message"] == f"container {container} is not valid for pod p"


async def test_log_tail_lines_may_not_be_negative(reader: httpx.AsyncClient) -> None:
    """upstream ValidatePodLogOptions: 422 `tailLines: Invalid value: -5: must be greater than or equal to 0`."""
    answer = await reader.get("/api/v1/namespaces/a/pods/p/log", params={"tailLines": "-5"})
    assert answer.status_code == 422 and "tailLines" in answer.json()["message"]


@pytest.mark.parametrize("path", [
    "/api/v1/namespaces/a/pods/..%2f..%2fb%2fp/log",
    "/api/v1/namespaces/a/pods/p/log/..%2f..%2f..%2fb%2fp%2fc",
    "/api/v1/namespaces/a/pods/p/exec?container=..%2f..%2fb%2fp%2fc&command=cat",
    "/api/v1/namespaces/a/pods/p/attach?container=..%2f..%2fb%2fp%2fc",
    "/api/v1/namespaces/a/pods/p/portforward?ports=80",
    "/api/v1/namespaces/a/pods/p/proxy/..%2f..%2fb%2fp",
    "/api/v1/namespaces/a/pods/p:80/proxy/",
    "/api/v1/namespaces/a/services/s/proxy/",
])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_subresources_the_emulator_does_not_serve_answer_404(reader: httpx.AsyncClient, path: str,
                                                                   method: str) -> None:
    """exec, attach, portforward and proxy are not emulated: a 404 Status, never a file's content."""
    answer = await reader.request(method, path)
    assert SECRET not in answer.text
    assert answer.status_code in (403, 404), answer.text
    assert answer.json()["kind"] == "Status"
