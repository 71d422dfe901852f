"""`liveplex fetch-model` as the init container the operator renders, run by the emulator's kubelet
with the podman runtime: a PersonaPlex LiveEngine whose model source is `hf://` (pointed by
`spec.pod.env` HF_ENDPOINT at a loopback Hub with the `resolve/` layout) gets its engine pod's init
container to fetch a tiny checkpoint into the claim (a host folder), and only then the engine
container starts, turns Ready and serves the checkpoint to the OpenAI SDK. A LiveEngine whose
checksum does not match never starts its engine: the init container is restarted with back-off
and its status carries fetch-model's one-line reason (its termination message). The one change to
the rendered pods: `--device cpu` for the `cuda` the operator asks for (this machine has no GPU).
Marker `containers`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from liveplex import cli
from liveplex.operator import render, spec
from liveplex.operator.settings import OperatorSettings
from tests.chart.test_install import emulator, kubectl
from tests.images import containers
from tests.operator import objects
from tests.support import clients, hub, platform

pytestmark = [pytest.mark.containers, pytest.mark.timeout(1800)]
REPO = "nvidia/tiny-personaplex"


def _pods(config: Path, instance: str = "tiny") -> list[dict]:
    return json.loads(kubectl(config, "get", "pods", "-n", "voice", "-l", f"app.kubernetes.io/instance={instance}",
                              "-o", "json"))["items"]


def _deployment(name: str, hub_url: str, claim: str, model_sha256: str) -> dict:
    """The operator's Deployment for a tiny PersonaPlex LiveEngine fetching from `hub_url`, on the CPU."""
    le = spec.parse(objects.liveengine(objects.personaplex_spec(
        model={"name": "tiny", "servedModels": ["gpt-live-1"], "dtype": "fp32", "source": {"fetch": {
            "url": f"hf://{REPO}", "claimName": claim, "path": "tiny", "sha256": {"model.safetensors": model_sha256}}}},
        pod={"env": [{"name": "HF_ENDPOINT", "value": hub_url}]}), name=name, namespace="voice"))
    deployment = render.render_deployment(le, OperatorSettings(
        image_repository="localhost/liveplex", engine_image_repository="localhost/liveplex-engine",
        image_tag=containers.TAG))
    del deployment["metadata"]["ownerReferences"]  # no LiveEngine object here: the pods alone
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    engine["args"][engine["args"].index("cuda")] = "cpu"
    return deployment


def _fetch_failure(config: Path) -> str:
    statuses = [s for p in _pods(config, "bad") for s in p["status"].get("initContainerStatuses") or []]
    return "".join(s.get("lastState", {}).get("terminated", {}).get("message", "") for s in statuses)


def test_the_fetch_model_init_container_fills_the_claim_and_the_engine_pod_serves_it(
        container_env: dict[str, str], engine_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("STORAGE_DRIVER", "CONTAINERS_CONF"):  # the kubelet's podman calls
        monkeypatch.setenv(key, container_env[key])
    tiny = tmp_path / "tiny"
    assert cli.main(["personaplex", "make-tiny", str(tiny)]) == 0
    files = hub.checkpoint_files(tiny)
    host, _ = containers.pod_address()
    with hub.serving(hub.Hub({REPO: files}, host=host)) as h:
        deployment = _deployment("tiny", h.url, "weights", hub.sha256(files["model.safetensors"]))
        state = tmp_path / "state"
        with emulator(state, runtime="podman") as (config, _):
            kubectl(config, "apply", "-f", "-", stdin=json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "voice"}}))
            kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump(deployment))
            try:
                platform.eventually(lambda: any(c["type"] == "Ready" and c["status"] == "True"
                                                for p in _pods(config) for c in p["status"].get("conditions", ())),
                                    "the engine pod Ready after its init container", deadline_s=900)
            except AssertionError as failure:
                logs = "\n".join(f"--- {p}\n{p.read_text()[-3000:]}" for p in sorted(state.glob("pods/voice/*/*.log")))
                raise AssertionError(f"{failure}\n{kubectl(config, 'get', 'pods', '-n', 'voice', '-o', 'yaml')}"
                                     f"\n{logs}") from failure
            [pod] = _pods(config)
            [init] = pod["status"]["initContainerStatuses"]
            assert init["name"] == "fetch-model" and init["state"]["terminated"]["exitCode"] == 0
            assert init["state"]["terminated"]["finishedAt"] <= \
                pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
            assert len(h.downloads) == len(files)
            claim = state / "claims" / "voice" / "weights" / "tiny"
            assert {k: v for k, v in hub.checkpoint_files(claim).items() if k in files} == files
            deltas, _, reason = asyncio.run(clients.sdk_call(f"http://{pod['status']['podIP']}:8000/v1"))
            assert reason == "close_requested" and {len(d) for d in deltas} == {3840}

            kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump(_deployment("bad", h.url, "other", "0" * 64)))
            platform.eventually(lambda: "checksum_mismatch" in _fetch_failure(config),
                                "the failed fetch's reason in the init container's status", deadline_s=120)
            assert _fetch_failure(config).startswith("fetch-model: checksum_mismatch (--sha256 model.safetensors)")
            [bad] = _pods(config, "bad")
            assert bad["status"]["phase"] == "Pending" and bad["status"]["containerStatuses"][0]["state"] == {
                "waiting": {"reason": "PodInitializing"}}  # the engine never started
    assert "lpemu-" not in containers.podman(container_env, "ps", "-a", "--format", "{{.Names}}").stdout
