"""Shared PersonaPlex fixtures: tiny random weights built once with upstream's modules (spec §6.3).

The LM part is `lm_checkpoint` (and `upstream_lm`); the Mimi part is `mimi_checkpoint` (and
`upstream_mimi`, `our_mimi`), defined in `mimi_fixtures` and registered here for every test.
"""

from __future__ import annotations

import os

# Before moshi is imported anywhere: otherwise it compiles its norm/RoPE/gating lazily on CPU.
os.environ.setdefault("NO_TORCH_COMPILE", "1")

import dataclasses
import pathlib

import pytest
import safetensors.torch
import torch

from liveplex.personaplex import config
from tests.personaplex.mimi_fixtures import mimi_checkpoint, our_mimi, upstream_mimi  # noqa: F401  (fixtures)

torch.set_num_threads(1)  # 2 shared cores; more threads only contend


@dataclasses.dataclass(frozen=True)
class LMCheckpoint:
    """Tiny LM weights under the real key names, and the config they were built with."""

    cfg: config.LMConfig
    state: dict[str, torch.Tensor]
    path: pathlib.Path


@pytest.fixture(scope="session")
def lm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> LMCheckpoint:
    from tests.personaplex import upstream

    cfg = config.tiny()
    lm = upstream.build_lm(cfg)
    upstream.randomize_(lm, seed=0)
    state = upstream.export_state(lm)
    path = tmp_path_factory.mktemp("weights") / "model.safetensors"
    safetensors.torch.save_file(state, str(path))
    return LMCheckpoint(cfg, state, path)


@pytest.fixture(scope="session")
def upstream_lm(lm_checkpoint: LMCheckpoint):  # -> moshi.models.lm.LMModel
    """Upstream's 16-step LM loaded back from the file with strict=True (proves the key names)."""
    from tests.personaplex import upstream

    lm = upstream.build_lm(lm_checkpoint.cfg)
    lm.load_state_dict(safetensors.torch.load_file(str(lm_checkpoint.path)), strict=True)
    return lm
