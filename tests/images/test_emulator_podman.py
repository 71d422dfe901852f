"""The emulator's kubelet with the podman runtime: the operator's hardened sim engine pod runs as a
container from the built image (uid 65532, read-only root, its emptyDirs as host folders) and
holds an SDK session on its own loopback address; a pod whose image is not in local storage waits
in ErrImagePull, then ImagePullBackOff, as a kubelet reports it; deleting the pods removes their
containers. Marker `containers`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from liveplex.operator import render, spec
from liveplex.operator.settings import OperatorSettings
from tests.chart.test_install import emulator, kubectl
from tests.images import containers
from tests.operator import objects
from tests.support import clients, platform

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]


def _waiting(config: Path, name: str) -> str:
    pod = json.loads(kubectl(config, "get", "pod", "-n", "voice", name, "-o", "json"))
    states = pod.get("status", {}).get("containerStatuses") or [{}]
    return states[0].get("state", {}).get("waiting", {}).get("reason", "")


def test_the_operators_sim_pod_runs_as_a_container_and_a_missing_image_fails_to_pull(
        container_env: dict[str, str], liveplex_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("STORAGE_DRIVER", "CONTAINERS_CONF"):  # the kubelet's podman calls
        monkeypatch.setenv(key, container_env[key])
    le = spec.parse(objects.liveengine(objects.sim_spec(), name="sim", namespace="voice"))
    deployment = render.render_deployment(le, OperatorSettings(image_repository="localhost/liveplex",
                                                               image_tag=containers.TAG))
    del deployment["metadata"]["ownerReferences"]  # no LiveEngine object here: the pods alone
    absent = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "absent", "namespace": "voice"},
              "spec": {"containers": [{"name": "c", "image": "localhost/absent:1"}]}}
    with emulator(tmp_path / "state", runtime="podman") as (config, _):
        kubectl(config, "apply", "-f", "-", stdin=json.dumps(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "voice"}}))
        kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump_all([deployment, absent]))
        platform.eventually(lambda: _waiting(config, "absent") == "ErrImagePull", "ErrImagePull", deadline_s=30)
        pods = lambda: json.loads(kubectl(config, "get", "pods", "-n", "voice", "-l",  # noqa: E731
                                          "app.kubernetes.io/instance=sim", "-o", "json"))["items"]
        platform.eventually(lambda: any(c["type"] == "Ready" and c["status"] == "True"
                                        for p in pods() for c in p["status"].get("conditions", ())),
                            "the sim pod Ready as a container", deadline_s=180)
        [pod] = pods()
        running = containers.podman(container_env, "ps", "--format", "{{.Names}} {{.User}}").stdout
        assert f"lpemu-voice-{pod['metadata']['name']}-engine" in running
        base = f"http://{pod['status']['podIP']}:8000/v1"
        deltas, words, reason = asyncio.run(clients.sdk_call(base))
        assert reason == "close_requested" and words.startswith("I hear") and {len(d) for d in deltas} == {3840}
        probe = containers.podman(container_env, "exec", f"lpemu-voice-{pod['metadata']['name']}-engine",
                                  "python3", "-c", "import os; print(os.getuid(), os.getgid())").stdout
        assert probe.split() == ["65532", "65532"]
        platform.eventually(lambda: _waiting(config, "absent") == "ImagePullBackOff", "ImagePullBackOff",
                            deadline_s=30)
        kubectl(config, "delete", "deployment", "-n", "voice", "sim", "--wait=false")
        platform.eventually(lambda: not pods(), "the pod gone", deadline_s=120)
    leftover = containers.podman(container_env, "ps", "-a", "--format", "{{.Names}}").stdout
    assert "lpemu-" not in leftover
