"""The images, built once per session for every containers test (docs/images.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.images import containers

REUSE = os.environ.get("LIVEPLEX_REUSE_IMAGES") == "1"
"""Keep the built images after the session and use them as they are in the next one (a developer's
loop where only host-side code changes, such as the emulator's); CI builds afresh."""
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


def _built(env: dict[str, str], name: str, *flags: str) -> Iterator[str]:
    ref = containers.image(name)
    if not (REUSE and containers.podman(env, "image", "exists", ref, check=False).returncode == 0):
        containers.build(env, "--only", name, *flags)
    yield ref
    if not REUSE:
        containers.podman(env, "rmi", "-f", ref, check=False)


@pytest.fixture(scope="session")
def liveplex_image(container_env: dict[str, str]) -> Iterator[str]:
    yield from _built(container_env, "liveplex")


@pytest.fixture(scope="session")
def redis_image(container_env: dict[str, str]) -> Iterator[str]:
    """Debian's redis-server (`Containerfile.redis`): the chart's bundled Redis."""
    yield from _built(container_env, "liveplex-redis")


@pytest.fixture(scope="session")
def engine_image(container_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wheel = os.environ.get("LIVEPLEX_TORCH_WHEEL") or torch_wheel(tmp_path_factory.mktemp("torch"))
    yield from _built(container_env, "liveplex-engine", "--torch-wheel", wheel)
