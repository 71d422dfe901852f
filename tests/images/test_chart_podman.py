"""The chart installed into the emulator with the podman runtime: the operator, the gateway, the
bundled Redis (`liveplex-redis`, Debian's redis-server) and the sim LiveEngine's pods all run as
hardened containers from the built images; the operator reaches the API server through its
projected ServiceAccount token (in-cluster configuration, unchanged), every pod reaches Redis and
the gateway by their Service names (the kubelet's `/etc/hosts` and Service proxy), the OpenAI SDK
holds a session through the chart's gateway, and the chart's `helm test` hook pod (`liveplex check`
against the gateway's Service) Succeeds. helm-python-sdk renders charts but has no release actions
(`helm test`), so the hook pod's manifest is applied as `helm test` would apply it.
Marker `containers`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from tests.chart import render
from tests.chart.test_install import emulator, install_and_place_a_session, kubectl
from tests.images import containers
from tests.support import clients, platform

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]
CHECK_S = 300.0


def _diagnosis(config: Path, state: Path) -> str:
    pods = kubectl(config, "get", "pods", "-n", "voice", "-o", "wide")
    events = kubectl(config, "get", "events", "-n", "voice")
    logs = "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in sorted(state.glob("pods/voice/*/*.log")))
    return f"{pods}\n{events}\n{logs}"


def _phase(config: Path, name: str) -> str:
    return json.loads(kubectl(config, "get", "pod", "-n", "voice", name, "-o", "json"))["status"].get("phase", "")


def test_the_chart_runs_as_containers_carries_an_sdk_session_and_passes_helm_test(
        container_env: dict[str, str], liveplex_image: str, redis_image: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("STORAGE_DRIVER", "CONTAINERS_CONF"):  # the kubelet's podman calls
        monkeypatch.setenv(key, container_env[key])
    repository, tag = redis_image.rsplit(":", 1)
    values = {"image": {"repository": "localhost/liveplex", "tag": containers.TAG},
              "redis": {"mode": "bundled", "bundled": {"image": {"repository": repository, "tag": tag}}},
              "gateway": {"replicas": 1}}
    state = tmp_path / "state"
    with emulator(state, runtime="podman") as (config, _):
        try:
            base = install_and_place_a_session(config, values, ready_s=240.0)
            deltas, words, reason = asyncio.run(clients.sdk_call(base))
            assert reason == "close_requested" and words.startswith("I hear") and {len(d) for d in deltas} == {3840}
            pods = json.loads(kubectl(config, "get", "pods", "-n", "voice", "-o", "json"))["items"]
            names = containers.podman(container_env, "ps", "--format", "{{.Names}}").stdout.split()
            labels = [p["metadata"].get("labels") or {} for p in pods]
            assert {"liveplex-operator", "liveplex-gateway", "liveplex-redis"} <= {
                x.get("app.kubernetes.io/name") for x in labels}
            assert sum(x.get("app.kubernetes.io/instance") == "sim" for x in labels) == 2
            assert all(  # the operator(s), the gateway, Redis, the two sim pods: each a container
                any(n.startswith(f"lpemu-voice-{p['metadata']['name']}-") for n in names) for p in pods)
            (hook,) = [o for o in render.render(values) if "helm.sh/hook" in o["metadata"].get("annotations", {})]
            kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump(hook))
            name = hook["metadata"]["name"]
            platform.eventually(lambda: _phase(config, name) in ("Succeeded", "Failed"),
                                "the helm test pod finished", deadline_s=CHECK_S)
            log = (state / "pods" / "voice" / name / "check.log").read_text()
            assert _phase(config, name) == "Succeeded", log
        except (AssertionError, ValueError) as failure:  # say why: the pods' states and logs
            raise AssertionError(f"{failure}\n{_diagnosis(config, state)}") from failure
    assert "lpemu-" not in containers.podman(container_env, "ps", "-a", "--format", "{{.Names}}").stdout
