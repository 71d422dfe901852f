"""Upstream moshi 0.2.13 modules built from our configs: the numerical reference of the tests.

Importing this module imports moshi; conftest sets NO_TORCH_COMPILE=1 before that happens.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import moshi.models.lm  # noqa: F401  (fails the session loudly if moshi is missing)
import safetensors.torch
import torch
from moshi.models import loaders
from moshi.models.lm import LMModel

from liveplex.personaplex import architecture, checkpoint, config


def lm_kwargs(cfg: config.LMConfig, dep_q: int) -> dict[str, object]:
    """Upstream `LMModel` arguments for our config with `dep_q` depformer steps (moshi's `_lm_kwargs` names)."""
    return architecture.to_moshi_kwargs(dataclasses.replace(cfg, dep_steps=dep_q))


def build_lm(cfg: config.LMConfig, dep_q: int = 16) -> LMModel:
    """An fp32 CPU upstream LM in eval mode (weights left at upstream's init)."""
    return LMModel(**lm_kwargs(cfg, dep_q)).eval()


def randomize_(lm: LMModel, seed: int = 0) -> None:
    """Spec §6.3 init: weights N(0, 1/sqrt(fan_in)), norm alphas 1 + 0.2 N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(lm.named_parameters()):
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith(".alpha"):
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(noise / p.shape[-1] ** 0.5)


def export_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """`state_dict()` with upstream's split attention names merged back into the file's names.

    `in_projs.{s}.weight` and `out_projs.{s}.weight` are concatenated along dim 0 in step order
    (spec §2.2).
    """
    merged: dict[str, list[tuple[int, torch.Tensor]]] = {}
    out: dict[str, torch.Tensor] = {}
    for key, value in module.state_dict().items():
        for split, joined in ((".in_projs.", ".in_proj_weight"), (".out_projs.", ".out_proj.weight")):
            if split in key:
                head, tail = key.split(split)
                step = int(tail.split(".")[0])
                merged.setdefault(head + joined, []).append((step, value))
                break
        else:
            out[key] = value.detach().clone().contiguous()
    for key, parts in merged.items():
        out[key] = torch.cat([t for _, t in sorted(parts, key=lambda p: p[0])]).contiguous()
    return out


def eight_step(state: dict[str, torch.Tensor], cfg: config.LMConfig) -> dict[str, torch.Tensor]:
    """The Moshi 8-step layout cut from a 16-step state (real key names): steps 0..7 and
    `depformer_emb.0..6`. Every 8-step tensor is a prefix of its 16-step counterpart (step-major rows)."""
    return {key: state[key][: shape[0]].clone() for key, shape in checkpoint.expected_lm(cfg, 8).items()}


def tiny_moshi_kwargs(**overrides: object) -> dict[str, object]:
    """moshi's own `_lm_kwargs` (Moshi 7B's config) shrunk to spec §6.2's tiny widths, with overrides."""
    return loaders._lm_kwargs | {
        "dim": 64, "num_heads": 4, "num_layers": 2, "context": 40, "depformer_dim": 32, "depformer_num_heads": 4,
        "depformer_num_layers": 2, "depformer_dim_feedforward": int(4.125 * 32)} | overrides


def write_moshi_lm(directory: pathlib.Path, kwargs: dict[str, object], seed: int) -> None:
    """`model.safetensors` and `config.json` of an LM built by moshi's own loader from `kwargs`, with
    spec §6.3's random weights, saved under the file's key names."""
    lm = loaders.get_moshi_lm(None, lm_kwargs=kwargs, device="cpu", dtype=torch.float32)
    randomize_(lm, seed)
    safetensors.torch.save_file(export_state(lm), str(directory / checkpoint.LM_FILE))
    (directory / architecture.CONFIG_FILE).write_text(json.dumps(kwargs))


def load_moshi_lm(directory: pathlib.Path) -> LMModel:
    """The LM of a checkpoint directory as moshi's own loader reads it (fp32, from its `config.json`)."""
    kwargs = json.loads((directory / architecture.CONFIG_FILE).read_text())
    return loaders.get_moshi_lm(directory / checkpoint.LM_FILE, lm_kwargs=kwargs, device="cpu", dtype=torch.float32)
