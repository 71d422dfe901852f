"""The issue's end-to-end example: a LiveEngine whose pod labels, annotations, tolerations and
nodeSelector the CRD admits but a real API server refuses in the Deployment. The real operator
(`liveplex operator run`, kopf) against the emulator must report the refusal in the status, in the
server's words, instead of reaching Ready=True."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from liveplex.operator import crd, names

from .contract import Kube, kube  # noqa: F401 (the fixture)

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


def test_a_refused_deployment_shows_in_the_liveengine_status(kube: Kube, tmp_path: Path) -> None:
    kube.crds.create_custom_resource_definition(crd.render_crd())
    assert kube.emulator is not None
    kubeconfig = kube.emulator.write_kubeconfig(tmp_path / "kubeconfig", kube.namespace)
    log = (tmp_path / "operator.log").open("w")
    operator = subprocess.Popen(
        [sys.executable, "-m", "liveplex.cli", "operator", "run", "-n", kube.namespace, "--status-interval-s", "1",
         "--liveness", f"http://127.0.0.1:{_free_port()}/healthz"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)}, stdout=log, stderr=subprocess.STDOUT)
    try:
        body = {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "sim"},
                "spec": {"engine": {"kind": "sim"}, "pod": BAD_POD}}
        kube.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, kube.namespace, names.PLURAL, body)
        deadline = time.monotonic() + 60
        while (ready := _ready(kube)).get("reason") != "ChildRefused":
            assert time.monotonic() < deadline, f"no ChildRefused in 60 s: {ready}; see {tmp_path}/operator.log"
            time.sleep(0.5)
        assert ready["status"] == "False"
        message = ready["message"]
        assert 'Deployment.apps "sim" is invalid' in message
        for field in ("spec.template.metadata.labels", "spec.template.metadata.annotations",
                      "spec.template.spec.tolerations[0].operator", "spec.template.spec.nodeSelector"):
            assert field in message, (field, message)
        time.sleep(3)  # three roll-ups later the refusal is still what the status says
        assert _ready(kube)["reason"] == "ChildRefused"
        assert not kube.apps.list_namespaced_deployment(kube.namespace).items
    finally:
        operator.terminate()
        operator.wait(15)
        log.close()
        kube.crds.delete_custom_resource_definition(crd.render_crd()["metadata"]["name"])
