"""Mimi test fixtures: tiny random Mimi built with upstream's modules, saved under the real names.

`conftest.py` registers the fixtures for every test of the directory; `caller_audio` and
`code_margins` are plain helpers test modules import. Importing this module imports moshi (NO_TORCH_COMPILE
is set first, as in conftest).
"""

from __future__ import annotations

import os

os.environ.setdefault("NO_TORCH_COMPILE", "1")

import dataclasses
import math
import pathlib

import pytest
import safetensors.torch
import torch
from moshi.models import compression as moshi_compression
from moshi.models import loaders as moshi_loaders

from liveplex.personaplex import mimi
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint_io
from tests.personaplex import upstream

# One thread: on a shared 2-core machine two threads made these small ops ten times slower.
torch.set_num_threads(1)


def upstream_config(cfg: mimi.MimiConfig) -> dict[str, object]:
    """moshi's `_mimi_config` with our numbers (spec §6.2)."""
    seanet = {
        "channels": 1, "dimension": cfg.dimension, "causal": True, "n_filters": cfg.filters,
        "n_residual_layers": 1, "activation": "ELU", "compress": cfg.compress, "dilation_base": 2,
        "disable_norm_outer_blocks": 0, "kernel_size": cfg.kernel_size,
        "residual_kernel_size": cfg.residual_kernel_size, "last_kernel_size": cfg.last_kernel_size,
        "norm": "none", "pad_mode": "constant", "ratios": list(cfg.ratios), "true_skip": True,
    }
    quantizer = {
        "dimension": cfg.codebook_dim, "n_q": cfg.stored_codebooks, "bins": cfg.bins,
        "input_dimension": cfg.dimension, "output_dimension": cfg.dimension,
    }
    transformer = {
        "d_model": cfg.dimension, "num_heads": cfg.num_heads, "num_layers": cfg.num_layers,
        "causal": True, "layer_scale": 0.01, "context": cfg.context, "conv_layout": True,
        "max_period": cfg.max_period, "gating": "none", "norm": "layer_norm",
        "positional_embedding": "rope", "dim_feedforward": cfg.dim_feedforward,
        "input_dimension": cfg.dimension, "output_dimensions": [cfg.dimension],
    }
    return {
        "sample_rate": cfg.sample_rate, "channels": 1, "frame_rate": cfg.frame_rate,
        "seanet": seanet, "quantizer": quantizer, "transformer": transformer,
    }


def build_upstream(cfg: mimi.MimiConfig) -> moshi_compression.MimiModel:
    """Upstream's Mimi for `cfg`, fp32 CPU, eval, 8 codebooks, weights at upstream's init."""
    return moshi_loaders.get_mimi(None, upstream_config(cfg), device="cpu", num_codebooks=cfg.codebooks)


def randomize_codebooks_(model: moshi_compression.MimiModel, seed: int) -> None:
    """Explicit codebooks (spec §6.3): `_initialized` 1, `cluster_usage` 1, random `embedding_sum`
    at the projected latent's scale, so codes spread over the codebook."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, buffer in sorted(model.named_buffers()):
            if name.endswith("_codebook._initialized") or name.endswith("_codebook.cluster_usage"):
                buffer.fill_(1.0)
            elif name.endswith("_codebook.embedding_sum"):
                buffer.copy_(mimi_checkpoint_io.CODEBOOK_SCALE * torch.randn(buffer.shape, generator=gen))
    for module in model.modules():
        if hasattr(module, "_embedding"):
            module.register_buffer("_embedding", None, persistent=False)


@dataclasses.dataclass(frozen=True)
class MimiCheckpoint:
    """Tiny Mimi weights under the real key names, and the config they were built with."""

    cfg: mimi.MimiConfig
    path: pathlib.Path


def write_upstream_checkpoint(path: pathlib.Path, cfg: mimi.MimiConfig, seed: int = 0) -> None:
    """Build upstream's Mimi with seeded default init and explicit codebooks, save it under real names."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build_upstream(cfg)
    randomize_codebooks_(model, seed)
    safetensors.torch.save_file(upstream.export_state(model), str(path))


@pytest.fixture(scope="session")
def mimi_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> MimiCheckpoint:
    """The tiny Mimi file (`tokenizer-e351c8d8-checkpoint125.safetensors`) of the weights fixture."""
    cfg = mimi.tiny_config()
    path = tmp_path_factory.mktemp("mimi") / "tokenizer-e351c8d8-checkpoint125.safetensors"
    write_upstream_checkpoint(path, cfg)
    return MimiCheckpoint(cfg, path)


@pytest.fixture(scope="session")
def upstream_mimi(mimi_checkpoint: MimiCheckpoint) -> moshi_compression.MimiModel:
    """Upstream's Mimi loaded back from the file with strict=True (proves the key names)."""
    model = build_upstream(mimi_checkpoint.cfg)
    model.load_state_dict(safetensors.torch.load_file(str(mimi_checkpoint.path)), strict=True)
    return model


@pytest.fixture(scope="session")
def our_mimi(mimi_checkpoint: MimiCheckpoint) -> mimi.Mimi:
    """Our Mimi loaded from the same file through the real loader."""
    return mimi.load(mimi_checkpoint.path, "cpu", mimi_checkpoint.cfg)


def caller_audio(rows: int, frames: int, seed: int, frame_samples: int = 1920) -> torch.Tensor:
    """Seeded synthetic caller audio [rows, frames * 1920] at 24 kHz: tone sweeps plus noise."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(frames * frame_samples, dtype=torch.float64) / 24000
    start = 100 + 400 * torch.rand(rows, 1, generator=gen, dtype=torch.float64)
    end = 300 + 3000 * torch.rand(rows, 1, generator=gen, dtype=torch.float64)
    duration = t[-1].item() + 1 / 24000
    phase = 2 * math.pi * (start * t + (end - start) * t**2 / (2 * duration))
    noise = 0.05 * torch.randn(rows, t.numel(), generator=gen, dtype=torch.float64)
    return (0.4 * torch.sin(phase) + noise).float()


def code_margins(model: moshi_compression.MimiModel, latent: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Relative gap between the nearest and the second-nearest centroid of each code upstream chose.

    latent: [B, D, 1] unquantized; codes: [B, 8, 1]. Returns [B, 8]. A code whose margin exceeds
    1e-4 is not a float-level near-tie, so another fp32 implementation must choose it too (§6.4).
    """
    margins = []
    quantizer = model.quantizer
    for half, half_codes in ((quantizer.rvq_first, codes[:, :1]), (quantizer.rvq_rest, codes[:, 1:])):
        residual = half.input_proj(latent)[:, :, 0]
        for level, index in zip(half.vq.layers, half_codes[:, :, 0].unbind(1)):
            centroids = level._codebook.embedding
            nearest = torch.cdist(residual, centroids).topk(2, largest=False).values
            margins.append((nearest[:, 1] - nearest[:, 0]) / nearest[:, 0])
            residual = residual - centroids[index]
    return torch.stack(margins, dim=1)
