"""The images, built once per session for every containers test (docs/images.md)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator

import pytest

from tests.images import containers

TORCH_WHEELS = "/opt/wheels/torch-2.13.0+cpu-*.whl"
"""This machine's CPU wheel (never a download); LIVEPLEX_TORCH_WHEEL names another."""


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
def engine_image(container_env: dict[str, str]) -> Iterator[str]:
    wheel = os.environ.get("LIVEPLEX_TORCH_WHEEL") or next(iter(sorted(glob.glob(TORCH_WHEELS))), None)
    if wheel is None:
        pytest.fail(f"no CPU torch wheel at {TORCH_WHEELS}: set LIVEPLEX_TORCH_WHEEL")
    containers.build(container_env, "--only", "liveplex-engine", "--torch-wheel", wheel)
    yield containers.image("liveplex-engine")
    containers.podman(container_env, "rmi", "-f", containers.image("liveplex-engine"), check=False)
