"""The local kubelet running real processes: sim pods from a Deployment, probes, preStop, grace, images it can't run."""

from __future__ import annotations

import os
import pathlib
from collections.abc import AsyncIterator

import httpx
import pytest

from liveplex.emulator import Emulator
from liveplex.emulator.apiserver import kinds, storage
from liveplex.emulator.controllers import deployments

from .conftest import until

LIVEPLEX = "ghcr.io/example/liveplex:0.1.0"
POD_IP_ENV = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
SIM_DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sim"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "sim"}}, "template": {
        "metadata": {"labels": {"app": "sim"}},
        "spec": {"terminationGracePeriodSeconds": 10, "containers": [{
            "name": "pod", "image": LIVEPLEX, "command": ["liveplex"],
            "args": ["serve", "--engine", "sim", "--host", "$(POD_IP)", "--port", "8000"],
            "env": [POD_IP_ENV], "ports": [{"name": "http", "containerPort": 8000}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 1},
            "lifecycle": {"preStop": {"httpGet": {"path": "/health", "port": 8000}}}}]}}},
}
STUBBORN = """
import http.server, os, signal
signal.signal(signal.SIGTERM, lambda *_: print("SIGTERM received and ignored", flush=True))
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("GET", self.path, flush=True)
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer((os.environ["POD_IP"], 8000), Handler).serve_forever()
"""


@pytest.fixture
async def kube(tmp_path: pathlib.Path) -> AsyncIterator[Emulator]:
    emulator = Emulator(tmp_path / "state")
    await emulator.start()
    yield emulator
    await emulator.stop()


def _pods(kube: Emulator, **labels: str) -> list[dict]:
    rt = kube.store.registry.by_key(kinds.POD_KEY)
    return kube.store.list(rt, "default")[0] if not labels else [
        p for p in kube.store.list(rt, "default")[0] if labels.items() <= (p["metadata"].get("labels") or {}).items()]


def _ready(kube: Emulator, n: int) -> list[dict] | None:
    pods = [p for p in _pods(kube, app="sim") if deployments.ready(p)]
    return pods if len(pods) == n else None


def _pod(name: str, container: dict, **spec: object) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [container], **spec}}


async def test_sim_pods_get_ready_on_their_own_addresses_and_scale_down_spares_the_busier_pod(kube: Emulator) -> None:
    store = kube.store
    deploys = store.registry.by_key("apps/deployments")
    store.create(deploys, "default", SIM_DEPLOYMENT)
    pods = await until(store, lambda: _ready(kube, 2), timeout=40)
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 2 and "127.0.0.1" not in ips and all(ip.startswith("127.0.") for ip in ips)
    async with httpx.AsyncClient() as http:
        assert {(await http.get(f"http://{ip}:8000/ready")).status_code for ip in ips} == {200}
    assert all(p["metadata"]["name"].startswith("sim-") and p["metadata"]["name"].count("-") == 2 for p in pods)
    busy, idle = pods
    podrt = store.registry.by_key(kinds.POD_KEY)
    for p, cost in ((busy, "10"), (idle, "1")):
        store.patch(podrt, "default", p["metadata"]["name"], storage.MERGE,
                    {"metadata": {"annotations": {deployments.DELETION_COST: cost}}})
    deploy = await until(store, lambda: (d := store.get(deploys, "default", "sim")).get("status", {}).get(
        "readyReplicas") == 2 and d)
    assert deploy["status"]["observedGeneration"] == 1
    store.patch_scale(deploys, "default", "sim", storage.MERGE, {"spec": {"replicas": 1}})
    await until(store, lambda: [p["metadata"]["name"] for p in _pods(kube, app="sim")] == [busy["metadata"]["name"]],
                timeout=20)
    events = store.list(store.registry.by_key("/events"), "default")[0]
    hooks = [e for e in events if e["involvedObject"]["name"] == idle["metadata"]["name"]
             and e["reason"] == "PreStopHook"]
    assert len(hooks) == 1 and "/health returned 200" in hooks[0]["message"]
    async with httpx.AsyncClient(verify=kube.tls(), headers={"Authorization": f"Bearer {kube.admin_token}"}) as http:
        log = await http.get(f"{kube.url}/api/v1/namespaces/default/pods/{busy['metadata']['name']}/log")
    assert "liveplex: serving" in log.text
    store.delete(deploys, "default", "sim")
    await until(store, lambda: not _pods(kube, app="sim"), timeout=20)
    assert store.list(store.registry.by_key("apps/replicasets"), "default")[0] == []


async def test_a_pod_ignoring_sigterm_gets_its_prestop_then_sigkill_at_the_end_of_its_grace(kube: Emulator) -> None:
    store = kube.store
    podrt = store.registry.by_key(kinds.POD_KEY)
    container = {"name": "c", "image": LIVEPLEX, "command": ["python", "-c", STUBBORN], "env": [POD_IP_ENV],
                 "ports": [{"containerPort": 8000}], "lifecycle": {"preStop": {"httpGet": {"path": "/hook",
                                                                                          "port": 8000}}},
                 "readinessProbe": {"httpGet": {"path": "/", "port": 8000}, "periodSeconds": 1}}
    store.create(podrt, "default", _pod("stubborn", container, terminationGracePeriodSeconds=1))
    await until(store, lambda: deployments.ready(store.get(podrt, "default", "stubborn")), timeout=20)
    last: list[dict] = []
    store.subscribe(lambda change: last.append(change.object) if change.key == kinds.POD_KEY else None)
    store.delete(podrt, "default", "stubborn")
    await until(store, lambda: store.find(podrt, "default", "stubborn") is None, timeout=20)
    final = next(o for o in reversed(last) if o["metadata"]["name"] == "stubborn")
    assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    log = (kube.state_dir / "pods" / "default" / "stubborn" / "c.log").read_text()
    assert log.index("GET /hook") < log.index("SIGTERM received and ignored")
    pid = int(final["status"]["containerStatuses"][0]["containerID"].rsplit("/", 1)[1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_an_image_the_emulator_cannot_run_leaves_the_pod_pending_with_a_reason(kube: Emulator) -> None:
    store = kube.store
    podrt = store.registry.by_key(kinds.POD_KEY)
    store.create(podrt, "default", _pod("web", {"name": "web", "image": "nginx:1.27"}))

    def waiting() -> dict | None:
        statuses = store.get(podrt, "default", "web").get("status", {}).get("containerStatuses") or []
        return statuses and statuses[0]["state"].get("waiting", {}).get("reason") == "ErrImageNeverPull" and \
            statuses[0]["state"]["waiting"]
    state = await until(store, waiting)
    assert "nginx:1.27" in state["message"]
    assert store.get(podrt, "default", "web")["status"]["phase"] == "Pending"


async def test_a_crashing_container_is_restarted_with_its_exit_code_recorded(kube: Emulator) -> None:
    store = kube.store
    podrt = store.registry.by_key(kinds.POD_KEY)
    store.create(podrt, "default", _pod("crash", {"name": "c", "image": LIVEPLEX,
                                                   "command": ["python", "-c", "raise SystemExit(3)"]}))

    def restarted() -> dict | None:
        statuses = store.get(podrt, "default", "crash").get("status", {}).get("containerStatuses") or []
        return statuses and statuses[0]["restartCount"] >= 1 and statuses[0]
    status = await until(store, restarted, timeout=20)
    assert status["lastState"]["terminated"]["exitCode"] == 3
