"""readinessGates as a kubelet honours them: a pod is Ready only when its containers are and every
gate's condition (written by someone else through `pods/status`) is True, and its Service's
EndpointSlice follows. A contract test: it runs unchanged against a real cluster (tests/e2e_cluster)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import kubernetes

from .contract import IMAGE, Kube, kubelet_kube  # noqa: F401 (the fixture)

T = TypeVar("T")
GATE = "contract.liveplex.io/admitted"


def _eventually(check: Callable[[], T], what: str, deadline_s: float = 60.0) -> T:
    deadline = time.monotonic() + deadline_s
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)
    return value


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
    _eventually(lambda: _conditions(kube, "gated").get("ContainersReady", None) is not None
                and _conditions(kube, "gated")["ContainersReady"].status == "True", "ContainersReady")
    ready = _conditions(kube, "gated")["Ready"]
    assert (ready.status, ready.reason) == ("False", "ReadinessGatesNotReady")
    assert ready.message == f'corresponding condition of pod readiness gate "{GATE}" does not exist.'
    assert _eventually(lambda: _slice_ready(kube), "the pod in the Service's EndpointSlice") == [False]

    def gate(status: str) -> None:
        kube.core.patch_namespaced_pod_status("gated", kube.namespace, {"status": {"conditions": [
            {"type": GATE, "status": status}]}})
    gate("False")
    _eventually(lambda: "but False" in (_conditions(kube, "gated")["Ready"].message or ""), "the gate False")
    gate("True")
    _eventually(lambda: _conditions(kube, "gated")["Ready"].status == "True", "Ready once the gate is True")
    assert _conditions(kube, "gated")[GATE].status == "True"  # the gate's writer owns its condition
    assert _eventually(lambda: _slice_ready(kube) == [True] and [True], "the endpoint ready") == [True]
    gate("False")
    _eventually(lambda: _conditions(kube, "gated")["Ready"].status == "False", "not Ready once the gate is False")
