"""The EndpointSlice and ServiceAccount controllers: their plans as pure functions, and what a client sees."""

from __future__ import annotations

import time

import kubernetes
import pytest

from liveplex.emulator.apiserver import kinds
from liveplex.emulator.controllers import endpointslices

from .contract import REAL_CLUSTER, Kube, contract_emulator, kube  # noqa: F401 (fixtures)

REGISTRY = kinds.Registry()
SERVICES, PODS, SLICES = (REGISTRY.by_key(k) for k in ("/services", kinds.POD_KEY, endpointslices.KEY))
SERVICE = {"metadata": {"name": "pp", "namespace": "voice", "uid": "svc", "labels": {"team": "x"}},
           "spec": {"clusterIP": "None", "selector": {"app": "pp"},
                    "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}}


def _pod(name: str, ip: str, ready: bool, deleting: bool = False) -> dict:
    meta = {"name": name, "namespace": "voice", "uid": name, "labels": {"app": "pp"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "n", "containers": [
                {"name": "c", "ports": [{"name": "http", "containerPort": 8000}]}]},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_service_gets_one_slice_with_its_pods_conditions_and_resolved_ports() -> None:
    pods = [_pod("a", "127.0.1.1", True), _pod("b", "127.0.1.2", False), _pod("c", "127.0.1.3", True, True),
            {**_pod("d", "", True), "status": {"phase": "Pending"}}]
    [write] = endpointslices.plan([(SERVICES, SERVICE), *((PODS, p) for p in pods)])
    assert isinstance(write, endpointslices.Write) and write.name is None
    body = write.body
    assert body["metadata"]["labels"] == {"team": "x", endpointslices.SERVICE_NAME: "pp",
                                          endpointslices.MANAGED_BY: endpointslices.CONTROLLER}
    assert [(e["addresses"], e["conditions"]) for e in body["endpoints"]] == [
        (["127.0.1.1"], {"ready": True, "serving": True, "terminating": False}),
        (["127.0.1.2"], {"ready": False, "serving": False, "terminating": False}),
        (["127.0.1.3"], {"ready": False, "serving": True, "terminating": True})]
    assert body["ports"] == [{"name": "http", "port": 8000, "protocol": "TCP"}]
    stored = {**body, "metadata": {**body["metadata"], "name": "pp-abcde"}}
    everything = [(SERVICES, SERVICE), (SLICES, stored), *((PODS, p) for p in pods)]
    assert endpointslices.plan(everything) == []  # level-based: nothing to do once it matches
    assert endpointslices.plan([(SERVICES, SERVICE), (SLICES, stored)])[0].body["endpoints"] == []
    assert endpointslices.plan([(SLICES, stored)]) == [endpointslices.Remove("voice", "pp-abcde")]


@pytest.mark.skipif(REAL_CLUSTER, reason="makes pods Ready by writing their status, which a kubelet would overwrite")
def test_clients_list_a_services_slices(kube: Kube) -> None:
    kube.core.create_namespaced_service(kube.namespace, {"metadata": {"name": "pp"}, "spec": {
        "selector": {"app": "pp"}, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}})
    kube.core.create_namespaced_pod(kube.namespace, {"metadata": {"name": "pp-a", "labels": {"app": "pp"}}, "spec": {
        "containers": [{"name": "c", "image": "ghcr.io/example/liveplex:0.1.0"}]}})
    kube.core.patch_namespaced_pod_status("pp-a", kube.namespace, {"status": {
        "podIP": "127.0.9.9", "conditions": [{"type": "Ready", "status": "True"}]}})
    discovery = kubernetes.client.DiscoveryV1Api(kube.client)
    deadline = time.monotonic() + 10
    while True:
        slices = discovery.list_namespaced_endpoint_slice(
            kube.namespace, label_selector=f"{endpointslices.SERVICE_NAME}=pp").items
        if slices and slices[0].endpoints:
            break
        assert time.monotonic() < deadline, slices
        time.sleep(0.05)
    [endpoint] = slices[0].endpoints
    assert endpoint.addresses == ["127.0.9.9"] and endpoint.conditions.ready
    assert [(p.name, p.port) for p in slices[0].ports] == [("http", 8000)]
    assert slices[0].metadata.owner_references[0].kind == "Service"


def test_every_active_namespace_gets_a_default_service_account() -> None:
    from liveplex.emulator.controllers import serviceaccounts

    namespaces = REGISTRY.by_key(kinds.NAMESPACE_KEY)
    accounts = REGISTRY.by_key(kinds.SERVICE_ACCOUNT_KEY)
    snapshot = [(namespaces, {"metadata": {"name": n}}) for n in ("a", "b")]
    snapshot += [(namespaces, {"metadata": {"name": "gone", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
                 (accounts, {"metadata": {"name": "default", "namespace": "a"}})]
    assert serviceaccounts.plan(snapshot) == [serviceaccounts.CreateDefault("b")]


def test_a_new_namespace_gets_a_default_service_account_that_tokens_can_be_requested_for(kube: Kube) -> None:
    deadline = time.monotonic() + 10
    while not kube.core.list_namespaced_service_account(kube.namespace).items:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    token = kube.core.create_namespaced_service_account_token("default", kube.namespace, {"spec": {}})
    assert token.status.token
