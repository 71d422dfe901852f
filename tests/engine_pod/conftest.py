"""Engine pod fixtures: one tiny checkpoint directory per test session (`liveplex personaplex make-tiny`)."""

from __future__ import annotations

import pathlib

import pytest
import torch

from liveplex import cli

torch.set_num_threads(1)  # 2 shared cores; more threads only contend


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("tiny") / "ck"
    assert cli.main(["personaplex", "make-tiny", str(directory)]) == 0
    return directory
