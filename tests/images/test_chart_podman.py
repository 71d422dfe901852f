"""The chart installed into the emulator with the podman runtime: the operator, the gateway and the
sim LiveEngine's pods all run as hardened containers from the built `liveplex` image, and the
OpenAI SDK holds a session through the chart's gateway. Redis is the test's own (`redis_url`): the
emulator has no Service DNS, so the bundled Redis' URL (a Service name) cannot resolve here.
Marker `containers`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.chart.test_install import emulator, install_and_place_a_session, kubectl
from tests.images import containers
from tests.support import clients

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]


def _diagnosis(config: Path, state: Path) -> str:
    pods = kubectl(config, "get", "pods", "-n", "voice", "-o", "wide")
    events = kubectl(config, "get", "events", "-n", "voice")
    logs = "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in sorted(state.glob("pods/voice/*/*.log")))
    return f"{pods}\n{events}\n{logs}"


def test_the_chart_runs_as_containers_and_carries_an_sdk_session(
        container_env: dict[str, str], liveplex_image: str, redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("STORAGE_DRIVER", "CONTAINERS_CONF"):  # the kubelet's podman calls
        monkeypatch.setenv(key, container_env[key])
    values = {"image": {"repository": "localhost/liveplex", "tag": containers.TAG},
              "redis": {"mode": "external", "external": {"url": redis_url}}, "gateway": {"replicas": 1}}
    with emulator(tmp_path / "state", runtime="podman") as (config, _):
        try:
            base = install_and_place_a_session(config, values, ready_s=240.0)
        except (AssertionError, ValueError) as failure:  # say why: the pods' states and logs
            raise AssertionError(f"{failure}\n{_diagnosis(config, tmp_path / 'state')}") from failure
        deltas, words, reason = asyncio.run(clients.sdk_call(base))
        assert reason == "close_requested" and words.startswith("I hear") and {len(d) for d in deltas} == {3840}
        pods = json.loads(kubectl(config, "get", "pods", "-n", "voice", "-o", "json"))["items"]
        names = containers.podman(container_env, "ps", "--format", "{{.Names}}").stdout.split()
        assert len(pods) == 4 and all(  # operator, gateway, two sim pods: each a container
            any(n.startswith(f"lpemu-voice-{p['metadata']['name']}-") for n in names) for p in pods)
    assert "lpemu-" not in containers.podman(container_env, "ps", "-a", "--format", "{{.Names}}").stdout
