"""The real operator (`liveplex operator run`, kopf) against the strict emulator.

The issue's end-to-end example: a LiveEngine whose pod labels, annotations, tolerations and
nodeSelector the CRD admits but a real API server refuses in the Deployment must show the refusal
in its status, in the server's words, instead of reaching Ready=True. And the chart's RBAC is
exactly enough: the operator works as the chart's ServiceAccount, and without one rule it does not."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from liveplex.emulator.apiserver import kinds
from liveplex.emulator.kubeconfig import write_kubeconfig
from liveplex.operator import crd, names
from tests.chart import render

from .contract import Kube, fresh_kube  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(os.environ.get("LIVEPLEX_E2E_CLUSTER") == "1",
                                 reason="starts its own operator; the cluster suite uses the chart's")]

BAD_POD = {"labels": {"team name": "voice"}, "annotations": {"-bad-": "x"},
           "tolerations": [{"key": "gpu", "operator": "Exists", "value": "yes"}],
           "nodeSelector": {"pool": "not a value!"}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(kube: Kube) -> dict:
    le = kube.custom.get_namespaced_custom_object(names.GROUP, names.VERSION, kube.namespace, names.PLURAL, "sim")
    return {c["type"]: c for c in (le.get("status") or {}).get("conditions", ())}.get("Ready", {})


@contextlib.contextmanager
def _operator(kubeconfig: Path, namespace: str, log: Path) -> Iterator[None]:
    """`liveplex operator run` watching `namespace` with `kubeconfig`'s credentials."""
    with log.open("w") as out:
        operator = subprocess.Popen(
            [sys.executable, "-m", "liveplex.cli", "operator", "run", "-n", namespace, "--status-interval-s", "1",
             "--liveness", f"http://127.0.0.1:{_free_port()}/healthz"],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)}, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield
        finally:
            operator.terminate()
            operator.wait(15)


def _until(check: Callable[[], object], what: str, log: Path, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {deadline_s} s; see {log}"
        time.sleep(0.3)


def _create(kube: Kube, pod: dict | None = None) -> None:
    body = {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "sim"},
            "spec": {"engine": {"kind": "sim"}, **({"pod": pod} if pod else {})}}
    kube.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, kube.namespace, names.PLURAL, body)


def test_a_refused_deployment_shows_in_the_liveengine_status(fresh_kube: Kube, tmp_path: Path) -> None:
    kube = fresh_kube
    assert kube.emulator is not None
    kube.crds.create_custom_resource_definition(crd.render_crd())
    log = tmp_path / "operator.log"
    with _operator(kube.emulator.write_kubeconfig(tmp_path / "kubeconfig", kube.namespace), kube.namespace, log):
        _create(kube, BAD_POD)
        _until(lambda: _ready(kube).get("reason") == "ChildRefused", "Ready=False, ChildRefused", log)
        ready = _ready(kube)
        assert ready["status"] == "False"
        message = ready["message"]
        assert 'Deployment.apps "sim" is invalid' in message
        for field in ("spec.template.metadata.labels", "spec.template.metadata.annotations",
                      "spec.template.spec.tolerations[0].operator", "spec.template.spec.nodeSelector"):
            assert field in message, (field, message)
        time.sleep(3)  # three roll-ups later the refusal is still what the status says
        assert _ready(kube)["reason"] == "ChildRefused"
        assert not kube.apps.list_namespaced_deployment(kube.namespace).items


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.mark.parametrize("dropped", [None, ("live.liveplex.io", "liveengines/finalizers")])
def test_the_charts_rbac_is_enough_for_the_operator_and_each_rule_counts(
        fresh_kube: Kube, tmp_path: Path, dropped: tuple[str, str] | None) -> None:
    """The operator runs as the chart's ServiceAccount with the chart's rules; without the
    finalizers rule its Deployment (blockOwnerDeletion) is refused with 403 and the status says so."""
    kube = fresh_kube
    assert kube.emulator is not None
    store = kube.emulator.store
    store.create(store.registry.by_key(kinds.NAMESPACE_KEY), "", {"metadata": {"name": render.NAMESPACE}})
    for obj in render.render({"operator": {"watch": {"namespaces": [kube.namespace]}}}):
        if obj["kind"] not in RBAC_KINDS:
            continue
        for rule in obj.get("rules") or []:
            if dropped and dropped[0] in rule["apiGroups"] and dropped[1] in rule["resources"]:
                rule["resources"] = [r for r in rule["resources"] if r != dropped[1]] or ["none"]
        rt = store.registry.by_kind(obj["apiVersion"], obj["kind"])
        store.create(rt, obj["metadata"].get("namespace", ""), obj)
    kube.crds.create_custom_resource_definition(crd.render_crd())
    [account] = {o["metadata"]["name"] for o in render.render() if o["kind"] == "ServiceAccount"
                 and "operator" in o["metadata"]["name"]}
    creds = kube.emulator.credentials(render.NAMESPACE, account)
    kubeconfig = write_kubeconfig(tmp_path / "operator.kubeconfig", kube.emulator.url, creds.token, creds.namespace,
                                  creds.ca_pem)
    log = tmp_path / "operator.log"
    with _operator(Path(kubeconfig), kube.namespace, log):
        _create(kube)
        if dropped is None:
            _until(lambda: kube.apps.list_namespaced_deployment(kube.namespace).items, "the Deployment", log)
            assert _ready(kube).get("reason") != "ChildRefused"
        else:
            _until(lambda: _ready(kube).get("reason") == "ChildRefused", "Ready=False, ChildRefused", log)
            assert "cannot set blockOwnerDeletion" in _ready(kube)["message"]
