"""Engine pod fixtures: one tiny checkpoint directory per test run (`liveplex personaplex make-tiny`,
built by the first xdist worker that needs it: tests/support/shared.py),
the model the golden tests serve from it (context 40, past the window), and upstream's Mimi from it."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest
import torch

from liveplex import cli
from tests.support import shared

torch.set_num_threads(1)  # 2 shared cores; more threads only contend


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return shared.built_once(tmp_path_factory, "tiny", _make_tiny())


@pytest.fixture(scope="session")
def tiny_moshi_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return shared.built_once(tmp_path_factory, "tiny-moshi", _make_tiny("--moshi"))


def _make_tiny(*flags: str) -> Callable[[pathlib.Path], None]:
    def build(directory: pathlib.Path) -> None:
        assert cli.main(["personaplex", "make-tiny", *flags, str(directory)]) == 0
    return build


@pytest.fixture(scope="session")
def tiny_model(tiny_dir):
    from tests.engine_pod import harness

    return harness.load(tiny_dir, context=40)


@pytest.fixture(scope="session")
def reference_mimi(tiny_dir, tiny_model):
    """Upstream's Mimi loaded strictly from the tiny directory (a `moshi` MimiModel)."""
    import safetensors.torch

    from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint
    from tests.personaplex import mimi_fixtures

    codec = mimi_fixtures.build_upstream(tiny_model.codec.cfg)
    codec.load_state_dict(safetensors.torch.load_file(str(tiny_dir / mimi_checkpoint.FILE_NAME)), strict=True)
    return codec
