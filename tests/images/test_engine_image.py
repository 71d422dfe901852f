"""The liveplex-engine image (torch from this machine's CPU wheel): its `fetch-model` fills a volume
from a loopback Hub (`HF_ENDPOINT`) as an init container would, once, and an engine pod container
on that volume serves a tiny PersonaPlex checkpoint to the OpenAI SDK. Both run hardened: uid
65532, read-only root, no capabilities, emptyDirs where they write. Marker `containers`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from liveplex import cli
from tests.images import containers
from tests.support import clients, hub

pytestmark = [pytest.mark.containers, pytest.mark.timeout(3600)]


@pytest.fixture
def env(container_env: dict[str, str], engine_image: str) -> dict[str, str]:
    return container_env


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny") / "ck"
    assert cli.main(["personaplex", "make-tiny", str(directory)]) == 0
    return directory


def _fetch(env: dict[str, str], hub_url: str, volume: Path, scratch: Path, *flags: str) -> str:
    """`fetch-model` in an engine-image container, the volume mounted read-write; its stdout."""
    proc = containers.podman(env, "run", "--rm", *containers.hardened_flags(scratch), "-v", f"{volume}:/models",
                             "-e", f"HF_ENDPOINT={hub_url}", containers.image("liveplex-engine"),
                             "fetch-model", "hf://nvidia/tiny-personaplex", "--dest", "/models/tiny", *flags,
                             check=False, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_fetch_model_fills_the_volume_once_and_an_engine_pod_serves_it(env: dict[str, str], tiny: Path,
                                                                       tmp_path: Path) -> None:
    files = hub.checkpoint_files(tiny)
    host, _ = containers.pod_address()
    volume = tmp_path / "pvc"
    volume.mkdir()
    os.chown(volume, containers.UID, containers.UID)  # fsGroup's effect on a real claim
    sums = ["--sha256", f"model.safetensors={hub.sha256(files['model.safetensors'])}"]
    with hub.serving(hub.Hub({"nvidia/tiny-personaplex": files}, host=host)) as h:
        first = _fetch(env, h.url, volume, tmp_path / "init-1", *sums)
        assert "fetched hf://nvidia/tiny-personaplex into /models/tiny" in first
        assert len(h.downloads) == len(files)
        second = _fetch(env, h.url, volume, tmp_path / "init-2", *sums)  # the next pod on the same claim
        assert "already holds" in second and len(h.downloads) == len(files)
    assert hub.checkpoint_files(volume / "tiny") == {**files, ".liveplex-fetch.json": (
        volume / "tiny" / ".liveplex-fetch.json").read_bytes()}

    host, port = containers.pod_address()
    args = ["serve", "--engine", "personaplex", "--model-path", "/models/tiny", "--device", "cpu",
            "--host", host, "--port", str(port), *containers.PAUSE_FLAGS]
    flags = [*containers.hardened_flags(tmp_path / "engine"), "-v", f"{volume}:/models:ro",
             "--shm-size", "256m"]
    with containers.running(env, containers.image("liveplex-engine"), args, host=host, port=port, flags=flags,
                            name="liveplex-test-engine") as pod:
        containers.wait_ready(env, pod)
        assert containers.live_config(pod)["pauses"] is True  # the image has the pause extra and Silero VAD
        deltas, _, reason = asyncio.run(clients.sdk_call(pod.base_url))
    assert reason == "close_requested"
    assert {len(d) for d in deltas} == {3840} and len(deltas) >= 0.7 * clients.SPEECH_MS / 80
