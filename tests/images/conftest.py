"""The images, built once per session for every containers test (docs/images.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.images import containers

TORCH = "torch==2.13.0"
"""The pin of the personaplex extra; LIVEPLEX_TORCH_WHEEL names a wheel file instead."""


def torch_wheel(into: Path) -> str:
    """The pinned torch wheel as pip resolves it for this machine (where a CPU wheel lies on disk,
    pip takes that one, as `pip install` does), downloaded into `into`."""
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                           TORCH, "-d", str(into)], capture_output=True, text=True, timeout=1800)
    wheels = sorted(into.glob("torch-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.fail(f"pip could not get {TORCH}: {done.stderr[-500:]} (or set LIVEPLEX_TORCH_WHEEL)")
    return str(wheels[0])


@pytest.fixture(scope="session")
def container_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    missing = containers.missing_tools()
    if missing:
        pytest.fail(f"the containers suite needs {', '.join(missing)} (bash scripts/test -m containers installs them)")
    return containers.environment(tmp_path_factory.mktemp("containers"))


@pytest.fixture(scope="session")
def liveplex_image(container_env: dict[str, str]) -> Iterator[str]:
    containers.build(container_env, "--only", "liveplex")
    yield containers.image("liveplex")
    containers.podman(container_env, "rmi", "-f", containers.image("liveplex"), check=False)


@pytest.fixture(scope="session")
def engine_image(container_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wheel = os.environ.get("LIVEPLEX_TORCH_WHEEL") or torch_wheel(tmp_path_factory.mktemp("torch"))
    containers.build(container_env, "--only", "liveplex-engine", "--torch-wheel", wheel)
    yield containers.image("liveplex-engine")
    containers.podman(container_env, "rmi", "-f", containers.image("liveplex-engine"), check=False)
