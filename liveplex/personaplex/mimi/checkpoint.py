"""Mimi checkpoint files: the expected-key table, header validation, loading, and random files.

The file is `tokenizer-e351c8d8-checkpoint125.safetensors` (spec §2.1, §2.3): 318 tensors for the
real codec, all 32 codebooks included. We check every header against a table generated from the
config before allocating anything, report all problems together naming the file, the key and both
shapes, then copy tensor by tensor into fp32 parameters (Mimi is fp32 on every device, §2.4).
Codebooks beyond the 8 used are expected and ignored silently; other extra keys get one warning.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import safetensors
import safetensors.torch
import torch

from liveplex.personaplex import errors
from liveplex.personaplex.mimi import config as mimi_config
from liveplex.personaplex.mimi import model as mimi_model

logger = logging.getLogger(__name__)

FILE_NAME = "tokenizer-e351c8d8-checkpoint125.safetensors"
"""Mimi's file name in a PersonaPlex (and Moshi) checkpoint directory."""

_FLOAT_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
_CODEBOOK_KEY = re.compile(r"quantizer\.rvq_rest\.vq\.layers\.(\d+)\._codebook\.")
_LAYER_SCALE_INIT = 0.01  # upstream's `layer_scale` for Mimi's transformers
CODEBOOK_SCALE = 0.02
"""Std of random centroids: that of the projected latent of a default-initialised codec, so that
nearest-centroid codes spread over the codebook instead of collapsing onto one entry."""


class MimiCheckpointError(errors.CheckpointError):
    """A Mimi file is missing, unreadable, or lacks or misshapes tensors; `problems` lists each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(*problems)


def expected_tensors(cfg: mimi_config.MimiConfig) -> dict[str, tuple[int, ...]]:
    """Key -> shape of every tensor the codec reads, generated from `cfg` (the used codebooks only)."""
    with torch.device("meta"):
        module = mimi_model.Mimi(cfg)
    return {key: tuple(value.shape) for key, value in module.state_dict().items()}


def _stored_extra(key: str, cfg: mimi_config.MimiConfig) -> bool:
    """True for the stored acoustic codebooks beyond the ones used (present in every real file)."""
    match = _CODEBOOK_KEY.match(key)
    return match is not None and cfg.codebooks - 1 <= int(match.group(1)) < cfg.stored_codebooks - 1


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def validate(path: Path, cfg: mimi_config.MimiConfig) -> None:
    """Check the file's header against `cfg` without loading; raises `MimiCheckpointError` listing
    every missing, misshaped or non-float tensor."""
    expected = expected_tensors(cfg)
    try:
        with safetensors.safe_open(str(path), framework="pt") as handle:
            found = {
                key: (tuple(handle.get_slice(key).get_shape()), handle.get_slice(key).get_dtype())
                for key in handle.keys()  # noqa: SIM118  (a safetensors handle, not a dict)
            }
    except FileNotFoundError:
        raise MimiCheckpointError([f"{path.name}: file not found at {path}"]) from None
    except Exception as exc:  # safetensors raises its own error types for malformed headers
        raise MimiCheckpointError([f"{path.name}: not a readable safetensors file ({exc})"]) from exc
    problems = []
    for key, shape in expected.items():
        if key not in found:
            problems.append(f"{path.name}: `{key}` is missing, expected shape {_fmt(shape)}")
            continue
        got_shape, got_dtype = found[key]
        if got_shape != shape:
            problems.append(f"{path.name}: `{key}` has shape {_fmt(got_shape)}, expected {_fmt(shape)}")
        if got_dtype not in _FLOAT_DTYPES:
            problems.append(f"{path.name}: `{key}` has dtype {got_dtype}, expected one of {sorted(_FLOAT_DTYPES)}")
    if problems:
        raise MimiCheckpointError(problems)
    extra = sorted(key for key in found if key not in expected and not _stored_extra(key, cfg))
    if extra:
        logger.warning(
            "Mimi checkpoint has unexpected tensors; ignored",
            extra={"file": path.name, "count": len(extra), "first": extra[:10]},
        )


def load(path: str | Path, device: torch.device | str = "cpu",
         cfg: mimi_config.MimiConfig | None = None) -> mimi_model.Mimi:
    """Validate the file's header, then load Mimi onto `device` in fp32, in eval mode.

    Raises `MimiCheckpointError` naming the file and every missing, misshaped or non-float tensor
    before any device memory is allocated.
    """
    cfg = cfg or mimi_config.mimi()
    path = Path(path)
    validate(path, cfg)
    with torch.device("meta"):
        module = mimi_model.Mimi(cfg)
    module = module.to_empty(device=device).eval()
    targets = module.state_dict(keep_vars=True)
    with safetensors.safe_open(str(path), framework="pt") as handle, torch.no_grad():
        for key, target in targets.items():
            target.copy_(handle.get_tensor(key))
    module.refresh()
    return module


def _randomize(module: mimi_model.Mimi, generator: torch.Generator) -> None:
    """Seeded weights: convs and linears uniform in ±1/sqrt(fan_in), LayerScale 0.01, LayerNorm 1/0."""
    with torch.no_grad():
        for name, tensor in module.state_dict(keep_vars=True).items():
            if name.endswith(("layer_scale_1.scale", "layer_scale_2.scale")):
                tensor.fill_(_LAYER_SCALE_INIT)
            elif ".norm" in name:
                tensor.fill_(1.0 if name.endswith("weight") else 0.0)
            elif "_codebook" not in name and tensor.dim() >= 1:
                fan_in = tensor[0].numel() if tensor.dim() > 1 else tensor.shape[0]
                bound = fan_in ** -0.5
                tensor.copy_(torch.rand(tensor.shape, generator=generator) * 2 * bound - bound)


def _random_module(cfg: mimi_config.MimiConfig, generator: torch.Generator) -> mimi_model.Mimi:
    """Seeded weights on the CPU, the used codebooks initialised explicitly (spec §6.3)."""
    with torch.device("meta"):
        module = mimi_model.Mimi(cfg)
    module = module.to_empty(device="cpu")
    _randomize(module, generator)
    with torch.no_grad():
        for key, value in module.state_dict(keep_vars=True).items():
            if key.endswith("_codebook.embedding_sum"):
                value.copy_(CODEBOOK_SCALE * torch.randn(value.shape, generator=generator))
            elif "_codebook." in key:
                value.fill_(1.0)
    module.refresh()
    return module


def random_mimi(cfg: mimi_config.MimiConfig, seed: int = 0, device: torch.device | str = "cpu") -> mimi_model.Mimi:
    """A seeded random codec on `device`, fp32, eval: the weights `write_random` writes, without a
    file (benchmarks and the GPU check: speed does not depend on the values)."""
    return _random_module(cfg, torch.Generator().manual_seed(seed)).to(device).eval()


def write_random(path: str | Path, cfg: mimi_config.MimiConfig, seed: int = 0) -> None:
    """Write a random Mimi checkpoint for `cfg` under the real key names, all stored codebooks included.

    Codebooks are initialised explicitly (`_initialized` 1, `cluster_usage` 1, random
    `embedding_sum` at the latent's scale); otherwise all codes collapse (spec §6.3).
    """
    generator = torch.Generator().manual_seed(seed)
    module = _random_module(cfg, generator)
    tensors = {key: value.detach().clone().contiguous() for key, value in module.state_dict().items()}
    for level in range(cfg.codebooks - 1, cfg.stored_codebooks - 1):  # stored, never used
        prefix = f"quantizer.rvq_rest.vq.layers.{level}._codebook."
        tensors[prefix + "_initialized"] = torch.ones(1)
        tensors[prefix + "cluster_usage"] = torch.ones(cfg.bins)
        noise = torch.randn(cfg.bins, cfg.codebook_dim, generator=generator)
        tensors[prefix + "embedding_sum"] = CODEBOOK_SCALE * noise
    safetensors.torch.save_file(tensors, str(path))
