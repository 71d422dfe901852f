"""The local kubelet running real processes: sim pods from a Deployment, probes, preStop, grace, images it can't run."""

from __future__ import annotations

import asyncio
import os
import pathlib
import socket
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


WHO_AM_I = """
import os, kubernetes
print("KUBECONFIG" in os.environ, flush=True)
kubernetes.config.load_kube_config()
try:
    kubernetes.client.CoreV1Api().list_namespaced_pod("default")
except kubernetes.client.ApiException as exc:
    print(exc.status, exc.body, flush=True)
"""


def _terminated_log(kube: Emulator, name: str) -> str | None:
    pod = kube.store.get(kube.store.registry.by_key(kinds.POD_KEY), "default", name)
    statuses = pod.get("status", {}).get("containerStatuses") or []
    done = statuses and "terminated" in statuses[0]["state"]
    return done and (kube.state_dir / "pods" / "default" / name / "c.log").read_text()


async def test_a_process_pod_reaches_the_api_server_as_its_service_account_and_not_at_all_without_automount(
        kube: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """The kubeconfig a process pod gets carries its ServiceAccount's token and the CA as a file (TLS
    verified, nothing written out); `automountServiceAccountToken: false` gives none, not the host's."""
    monkeypatch.setenv("KUBECONFIG", str(kube.write_kubeconfig(tmp_path / "admin.kubeconfig")))
    store = kube.store
    store.create(store.registry.by_key(kinds.SERVICE_ACCOUNT_KEY), "default", {"metadata": {"name": "bot"}})
    store.create(store.registry.by_key("/serviceaccounts"), "default",
                 {"metadata": {"name": "quiet"}, "automountServiceAccountToken": False})
    podrt = store.registry.by_key(kinds.POD_KEY)
    container = {"name": "c", "image": LIVEPLEX, "command": ["python", "-c", WHO_AM_I]}
    store.create(podrt, "default", _pod("bot", container, serviceAccountName="bot", restartPolicy="Never"))
    store.create(podrt, "default", _pod("quiet", container, serviceAccountName="quiet", restartPolicy="Never"))
    log = await until(store, lambda: _terminated_log(kube, "bot"), timeout=30)
    assert log.startswith("True\n403 ") and 'User \\"system:serviceaccount:default:bot\\" cannot list' in log, log
    config = (kube.state_dir / "pods" / "default" / "bot" / "serviceaccount" / "kubeconfig").read_text()
    assert "certificate-authority: " in config and "-data" not in config
    quiet = await until(store, lambda: _terminated_log(kube, "quiet"), timeout=30)
    assert quiet.startswith("False\n"), quiet


def _step(name: str, code: int = 0) -> dict:
    return {"name": name, "image": LIVEPLEX, "command": [
        "python", "-c",
        f"open('order.txt', 'a').write('{name}\\n'); print('{name} exits {code}'); raise SystemExit({code})"]}


async def test_init_containers_run_in_order_to_completion_before_the_containers_and_fail_as_a_kubelet_reports(
        kube: Emulator) -> None:
    from liveplex.emulator.apiserver import tables

    store = kube.store
    podrt = store.registry.by_key(kinds.POD_KEY)
    main = {"name": "main", "image": LIVEPLEX, "command": [
        "python", "-c", "open('order.txt', 'a').write('main\\n'); import time; time.sleep(60)"]}
    store.create(podrt, "default", {"metadata": {"name": "ordered"}, "spec": {
        "initContainers": [_step("first"), _step("second")], "containers": [main],
        "terminationGracePeriodSeconds": 1}})
    store.create(podrt, "default", {"metadata": {"name": "failed"}, "spec": {
        "initContainers": [{**_step("fails", 3), "terminationMessagePolicy": "FallbackToLogsOnError"}],
        "containers": [main], "restartPolicy": "Never"}})
    store.create(podrt, "default", {"metadata": {"name": "looping"}, "spec": {
        "initContainers": [_step("fails", 1)], "containers": [main], "terminationGracePeriodSeconds": 1}})

    def pod(name: str) -> dict:
        return store.get(podrt, "default", name)

    def conditions(name: str) -> dict[str, str]:
        return {c["type"]: c["status"] for c in pod(name)["status"].get("conditions") or []}
    await until(store, lambda: conditions("ordered").get("Ready") == "True", timeout=30)
    ordered = pod("ordered")
    order = kube.state_dir / "pods/default/ordered/order.txt"
    async with asyncio.timeout(10):
        while order.read_text().count("\n") < 3:  # Ready (no probe) may come before main's first line
            await asyncio.sleep(0.05)
    assert order.read_text() == "first\nsecond\nmain\n"
    assert [(s["name"], s["state"]["terminated"]["reason"], s["ready"])
            for s in ordered["status"]["initContainerStatuses"]] == [("first", "Completed", True),
                                                                    ("second", "Completed", True)]
    assert conditions("ordered")["Initialized"] == "True" and tables._pod_status(ordered, 0) == "Running"

    failed = await until(store, lambda: pod("failed")["status"].get("phase") == "Failed" and pod("failed"))
    terminated = failed["status"]["initContainerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    assert terminated["message"] == "fails exits 3\n"  # FallbackToLogsOnError: the log's tail
    assert failed["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert tables._pod_status(failed, 0) == "Init:Error" and conditions("failed")["Initialized"] == "False"
    assert (kube.state_dir / "pods/default/failed/order.txt").read_text() == "fails\n"  # main never ran

    looping = await until(store, lambda: (pod("looping")["status"].get("initContainerStatuses") or [{}])[0].get(
        "restartCount", 0) >= 1 and pod("looping"), timeout=20)
    assert tables._pod_status(looping, 0) == "Init:CrashLoopBackOff" and tables._restarts(looping, 0) >= 1
    assert looping["status"]["phase"] == "Pending"
    assert next(c for c in looping["status"]["conditions"] if c["type"] == "Initialized")["message"] == \
        "containers with incomplete status: [fails]"


async def test_a_pod_whose_port_a_host_process_holds_everywhere_waits_with_a_sandbox_event_and_then_starts(
        kube: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    from liveplex.emulator.controllers import kubelet

    monkeypatch.setattr(kubelet, "SANDBOX_RETRY_S", 0.2)
    squatter = socket.socket()
    squatter.bind(("0.0.0.0", 0))  # a host process listening on every address
    squatter.listen()
    port = squatter.getsockname()[1]
    store = kube.store
    podrt = store.registry.by_key(kinds.POD_KEY)
    store.create(podrt, "default", _pod("squeezed", {"name": "c", "image": LIVEPLEX, "ports": [{"containerPort": port}],
                                                     "command": ["python", "-c", "import time; time.sleep(60)"]},
                                        terminationGracePeriodSeconds=1))
    events = store.registry.by_key("/events")
    failed = await until(store, lambda: [e for e in store.list(events, "default")[0]
                                         if e["reason"] == "FailedCreatePodSandBox"])
    assert f"no loopback address has ports [{port}] free" in failed[0]["message"]
    assert not store.get(podrt, "default", "squeezed").get("status", {}).get("podIP")
    squatter.close()
    pod = await until(store, lambda: store.get(podrt, "default", "squeezed").get("status", {}).get("podIP"))
    assert pod.startswith("127.0.")
