"""readinessGates as a kubelet honours them: a pod is Ready only when its containers are and every
gate's condition (written by someone else through `pods/status`) is True, and its Service's
EndpointSlice follows. A contract test: it runs unchanged against a real cluster (tests/e2e_cluster)."""

from __future__ import annotations

import kubernetes

from tests.support.platform import eventually

from .contract import IMAGE, Kube, kubelet_kube  # noqa: F401 (the fixture)

GATE = "contract.liveplex.io/admitted"
DEADLINE_S = 60.0


def _conditions(kube: Kube, name: str) -> dict[str, kubernetes.client.V1PodCondition]:
    pod = kube.core.read_namespaced_pod_status(name, kube.namespace)
    return {c.type: c for c in pod.status.conditions or []}


def _slice_ready(kube: Kube) -> list[bool]:
    slices = kubernetes.client.DiscoveryV1Api(kube.client).list_namespaced_endpoint_slice(
        kube.namespace, label_selector="kubernetes.io/service-name=gated").items
    return [bool(e.conditions.ready) for s in slices for e in s.endpoints or []]


def test_a_pod_with_a_readiness_gate_is_ready_only_once_the_gates_condition_is_true(kubelet_kube: Kube) -> None:
    kube = kubelet_kube
    kube.core.create_namespaced_service(kube.namespace, {
        "metadata": {"name": "gated"}, "spec": {"selector": {"app": "gated"}, "ports": [{"port": 8000}]}})
    kube.core.create_namespaced_pod(kube.namespace, {
        "metadata": {"name": "gated", "labels": {"app": "gated"}},
        "spec": {"readinessGates": [{"conditionType": GATE}], "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": IMAGE, "command": ["python3", "-c", "import time; time.sleep(3600)"]}]}})
    eventually(lambda: "ContainersReady" in _conditions(kube, "gated")
               and _conditions(kube, "gated")["ContainersReady"].status == "True", "ContainersReady", DEADLINE_S)
    ready = _conditions(kube, "gated")["Ready"]
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    assert ready.message == f'corresponding condition of pod readiness gate "{GATE}" does not exist.'
    eventually(lambda: bool(_slice_ready(kube)), "the pod in the Service's EndpointSlice", DEADLINE_S)
    assert _slice_ready(kube) == [False]

    def gate(status: str) -> None:
        kube.core.patch_namespaced_pod_status("gated", kube.namespace, {"status": {"conditions": [
            {"type": GATE, "status": status}]}})
    gate("False")
    eventually(lambda: "but False" in (_conditions(kube, "gated")["Ready"].message or ""), "the gate False", DEADLINE_S)
    gate("True")
    eventually(lambda: _conditions(kube, "gated")["Ready"].status == "True", "Ready once the gate is True", DEADLINE_S)
    assert _conditions(kube, "gated")[GATE].status == "True"  # the gate's writer owns its condition
    eventually(lambda: _slice_ready(kube) == [True], "the endpoint ready", DEADLINE_S)
    gate("False")
    eventually(lambda: _conditions(kube, "gated")["Ready"].status == "False", "not Ready once the gate is False",
               DEADLINE_S)
