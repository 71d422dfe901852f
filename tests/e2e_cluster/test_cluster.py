"""The opt-in suite for a real cluster: skipped unless `KUBECONFIG` and `LIVEPLEX_E2E_CLUSTER=1`.

It needs the CRD installed (`liveplex operator crd | kubectl apply -f -`) and the operator running
with a Redis (the chart, docs/deploy.md), then applies the sim example in `LIVEPLEX_E2E_NAMESPACE`
(default `liveplex-e2e`) and checks what the emulator cannot prove: a real API server admits it,
the real scheduler and kubelet make its pods Ready, and the operator reports READY True.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not (os.environ.get("KUBECONFIG") and os.environ.get("LIVEPLEX_E2E_CLUSTER") == "1"),
    reason="a real cluster: set KUBECONFIG and LIVEPLEX_E2E_CLUSTER=1")

NAMESPACE = os.environ.get("LIVEPLEX_E2E_NAMESPACE", "liveplex-e2e")
EXAMPLE = Path(__file__).parents[2] / "examples" / "liveengine-sim.yaml"


def kubectl(*args: str) -> str:
    return subprocess.run(["kubectl", "-n", NAMESPACE, *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout


def test_the_sim_example_becomes_ready_and_goes_with_its_children() -> None:
    subprocess.run(["kubectl", "create", "namespace", NAMESPACE], capture_output=True, timeout=60)
    kubectl("apply", "-f", str(EXAMPLE))
    try:
        deadline = time.monotonic() + 300
        while True:
            status = json.loads(kubectl("get", "le", "sim", "-o", "json")).get("status", {})
            ready = {c["type"]: c for c in status.get("conditions", ())}.get("Ready", {})
            if ready.get("status") == "True":
                break
            assert time.monotonic() < deadline, f"not ready after 300 s: {status}"
            time.sleep(5)
        assert status["readyReplicas"] == 2
    finally:
        kubectl("delete", "le", "sim", "--wait=true")
    assert not json.loads(kubectl("get", "deploy", "-l", "app.kubernetes.io/instance=sim", "-o", "json"))["items"]
