"""The images `scripts/build-images` makes, run as real containers the way a hardened pod runs
them: uid 65532, a read-only root, no capabilities, emptyDirs where they write. Behind the
`containers` marker (buildah, podman, runc and debootstrap from apt: `bash scripts/test -m
containers` installs them); the first run also makes the cached Debian base (about a minute)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from liveplex import __version__
from tests.images import containers
from tests.support import clients

pytestmark = [pytest.mark.containers, pytest.mark.timeout(3600)]


@pytest.fixture
def env(container_env: dict[str, str], liveplex_image: str) -> dict[str, str]:
    return container_env


def test_the_image_says_its_version_runs_as_65532_and_carries_oci_labels(env: dict[str, str]) -> None:
    ref = containers.image("liveplex")
    assert containers.podman(env, "run", "--rm", "--read-only", ref, "--version").stdout == f"liveplex {__version__}\n"
    ids = containers.podman(env, "run", "--rm", "--read-only", "--entrypoint", "id", ref).stdout
    assert ids.startswith("uid=65532(liveplex) gid=65532(liveplex)")
    config = json.loads(containers.podman(env, "image", "inspect", ref).stdout)[0]["Config"]
    assert config["User"] == "65532:65532" and config["Entrypoint"] == ["liveplex"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.title"] == "liveplex"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert len(labels["org.opencontainers.image.revision"].split("-")[0]) == 40  # a commit id
    assert "torch" not in containers.podman(env, "run", "--rm", "--entrypoint", "ls", ref,
                                            "/opt/liveplex/lib/python3.11/site-packages").stdout


def test_the_root_is_read_only_and_only_the_empty_dirs_take_writes(env: dict[str, str], tmp_path: Path) -> None:
    flags = containers.hardened_flags(tmp_path)
    probe = ("import pathlib\n"
             "for d in ('/tmp', '/var/cache/liveplex'): (pathlib.Path(d) / 'w').write_text('x')\n"
             "try:\n    pathlib.Path('/opt/liveplex/w').write_text('x')\nexcept OSError as e: print(e.errno)\n")
    out = containers.podman(env, "run", "--rm", *flags, "--entrypoint", "python3", containers.image("liveplex"),
                            "-c", probe).stdout
    assert out.strip() == "30"  # EROFS
    assert (tmp_path / "tmp" / "w").read_text() == "x" and (tmp_path / "var-cache-liveplex" / "w").read_text() == "x"


def test_a_sim_pod_container_that_can_pause_serves_an_sdk_session(env: dict[str, str], tmp_path: Path) -> None:
    host, port = containers.pod_address()
    args = ["serve", "--engine", "sim", "--host", host, "--port", str(port), *containers.PAUSE_FLAGS]
    with containers.running(env, containers.image("liveplex"), args, host=host, port=port,
                            flags=containers.hardened_flags(tmp_path), name="liveplex-test-serve") as pod:
        containers.wait_ready(env, pod)
        assert containers.live_config(pod)["pauses"] is True  # the image has the pause extra and Silero VAD
        deltas, words, reason = asyncio.run(clients.sdk_call(pod.base_url))
    assert reason == "close_requested" and words.startswith("I hear")
    assert {len(d) for d in deltas} == {3840}
