"""Loading the LM from `model.safetensors`: header validation against a config, tensor copy.

The expected table is generated from our own modules built on the meta device, whose parameter
names are the checkpoint's, so the same code checks every config, the tiny test one and the real
one (spec personaplex §2.5); the config itself is derived from the checkpoint (`architecture`).
Every header is validated before any device memory is allocated, and every problem is reported
together in one `CheckpointError`. A 16-step module built from a file with Moshi's 8-step
depformer gets steps 8..15 copied from 0..7 as the reference loader does, and `depformer_emb.7`,
which such a file lacks, zero-filled (Decision D2; only diagnostics ask for it).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import re

import safetensors
import torch

from liveplex.personaplex import config, depformer, errors, temporal

logger = logging.getLogger(__name__)

LM_FILE = "model.safetensors"
_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
_PER_STEP = re.compile(r"^(depformer_in|linears)\.(\d+)\.|\.gating\.(\d+)\.")
_DEP_EMB = re.compile(r"^depformer_emb\.(\d+)\.")


CheckpointError = errors.CheckpointError
"""Re-exported: the package's exception root lives in `errors` (no import cycle with `mimi`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TensorInfo:
    """A tensor's header entry: shape and safetensors dtype name ("BF16", "F32", ...)."""

    shape: tuple[int, ...]
    dtype: str


@dataclasses.dataclass(frozen=True, slots=True)
class LM:
    """The loaded language model and what the file said about itself."""

    temporal: temporal.Temporal
    depformer: depformer.Depformer
    file_steps: int
    """Depformer steps stored in the file: 16 (PersonaPlex) or 8 (Moshi layout): `cfg.dep_steps`."""
    stored_dtypes: tuple[str, ...]


def read_header(path: pathlib.Path) -> dict[str, TensorInfo]:
    """Every key's shape and dtype, without reading tensor data."""
    try:
        with safetensors.safe_open(str(path), framework="pt") as f:
            out = {}
            for key in f.keys():
                sl = f.get_slice(key)
                out[key] = TensorInfo(tuple(sl.get_shape()), sl.get_dtype())
            return out
    except FileNotFoundError as e:
        raise CheckpointError(f"{path}: file not found") from e
    except Exception as e:  # safetensors raises its own error types for bad headers
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from e


def expected_lm(cfg: config.LMConfig, steps: int) -> dict[str, tuple[int, ...]]:
    """Key -> shape of an LM with `steps` depformer steps, from our modules on the meta device."""
    with torch.device("meta"):
        modules = (temporal.Temporal(cfg), depformer.Depformer(cfg, steps))
    return {k: tuple(v.shape) for m in modules for k, v in m.state_dict().items()}


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def check_header(name: str, header: dict[str, TensorInfo], expected: dict[str, tuple[int, ...]]) -> list[str]:
    """All problems of a header against an expected table, one message per problem."""
    problems = []
    for key, shape in expected.items():
        info = header.get(key)
        if info is None:
            problems.append(f"{name}: `{key}` is missing, expected shape {_shape(shape)}")
            continue
        if info.shape != shape:
            problems.append(f"{name}: `{key}` has shape {_shape(info.shape)}, expected {_shape(shape)}")
        if info.dtype not in _DTYPES:
            problems.append(f"{name}: `{key}` has dtype {info.dtype}, expected one of {', '.join(_DTYPES)}")
    return problems


def _source(key: str, file_steps: int) -> str | None:
    """Which file key fills `key` of a 16-step module loaded from an 8-step file (None: zeros)."""
    m = _DEP_EMB.match(key)
    if m:
        s = int(m.group(1))
        if s == file_steps - 1:
            return None
        return key if s < file_steps else key.replace(f"depformer_emb.{s}.", f"depformer_emb.{s - file_steps}.")
    m = _PER_STEP.search(key)
    if m:
        s = int(m.group(2) or m.group(3))
        if s >= file_steps:
            old, new = (f"{m.group(1)}.{s}.", f"{m.group(1)}.{s - file_steps}.") if m.group(1) else \
                (f".gating.{s}.", f".gating.{s - file_steps}.")
            return key.replace(old, new, 1)
    return key


def shapes(header: dict[str, TensorInfo]) -> dict[str, tuple[int, ...]]:
    """Key -> shape, what `architecture.derive` reads."""
    return {key: info.shape for key, info in header.items()}


def validate_lm(path: pathlib.Path, cfg: config.LMConfig) -> dict[str, TensorInfo]:
    """Read and check `path`'s header against `cfg` (its `dep_steps` included) without loading.

    Raises `CheckpointError` listing every missing, misshaped or unsupported tensor.
    """
    path = pathlib.Path(path)
    header = read_header(path)
    problems = check_header(path.name, header, expected_lm(cfg, cfg.dep_steps))
    if problems:
        raise CheckpointError(*problems)
    return header


def load_lm(path: pathlib.Path, cfg: config.LMConfig, *, steps: int = config.AGENT_CODEBOOKS,
            device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> LM:
    """Validate `path` against `cfg`, then load a temporal transformer and a `steps`-step depformer.

    `steps` is 8 for the live engine (only rows and keys of steps 0..7 are read) and 16 for
    parity tests; 16 from an 8-step file fills steps 8..15 (D2). Raises `CheckpointError` naming
    the file, every bad key and both shapes.
    """
    path = pathlib.Path(path)
    header = validate_lm(path, cfg)
    file_steps = cfg.dep_steps
    expected = expected_lm(cfg, file_steps)
    if steps > file_steps:
        logger.warning(
            "checkpoint has the Moshi depformer layout: user-stream steps filled",
            extra={"file": str(path), "file_steps": file_steps,
                   "filled": f"steps {file_steps}..{steps - 1} copied from 0..{steps - file_steps - 1}, "
                             f"depformer_emb.{file_steps - 1} zero-filled"})
        cfg = dataclasses.replace(cfg, dep_steps=steps)
    extra = sorted(set(header) - set(expected))
    if extra:
        logger.warning("checkpoint has keys the model does not use; ignored",
                       extra={"file": str(path), "count": len(extra), "first": extra[:10]})

    with torch.device("meta"):
        temp = temporal.Temporal(cfg).to(dtype)
        dep = depformer.Depformer(cfg, steps).to(dtype)
    temp.to_empty(device=device)
    dep.to_empty(device=device)
    with safetensors.safe_open(str(path), framework="pt") as f, torch.no_grad():
        for module in (temp, dep):
            for key, param in module.state_dict().items():
                src = _source(key, file_steps)
                if src is None:
                    param.zero_()
                    continue
                rows = header[src].shape[0]
                if rows > param.shape[0]:  # fewer steps resident than stored: read a prefix
                    param.copy_(f.get_slice(src)[: param.shape[0]])
                elif rows < param.shape[0]:  # 16 steps from an 8-step file: repeat the stack
                    param.copy_(f.get_tensor(src).repeat(param.shape[0] // rows, *([1] * (param.dim() - 1))))
                else:
                    param.copy_(f.get_tensor(src))
    stored = tuple(sorted({info.dtype for info in header.values()}))
    params = sum(p.numel() for m in (temp, dep) for p in m.parameters())
    logger.info("language model loaded", extra={
        "file": str(path), "file_steps": file_steps, "resident_steps": steps, "stored_dtypes": stored,
        "parameters": params, "device": str(device), "dtype": str(dtype)})
    return LM(temp.eval(), dep.eval(), file_steps, stored)


def random_lm(cfg: config.LMConfig, seed: int, steps: int = config.AGENT_CODEBOOKS,
              device: torch.device | str = "cpu") -> LM:
    """Seeded random weights (spec §6.3): N(0, 1/sqrt(fan_in)), norm alphas 1 + 0.2 N(0, 1).

    For benchmarks and `make-tiny`: speed does not depend on the values. Generated on `device`
    (values differ between CPU and CUDA generators).
    """
    gen = torch.Generator(device).manual_seed(seed)
    with torch.device(device):
        temp, dep = temporal.Temporal(cfg).eval(), depformer.Depformer(cfg, steps).eval()
    with torch.no_grad():
        for module in (temp, dep):
            for key, p in module.named_parameters():
                noise = torch.randn(p.shape, generator=gen, device=device)
                p.copy_(1 + 0.2 * noise if key.endswith(".alpha") else noise / p.shape[-1] ** 0.5)
    return LM(temp, dep, steps, ("F32",))


def lm_state(lm: LM) -> dict[str, torch.Tensor]:
    """The LM's tensors under the checkpoint's key names, each its own copy (the embedding tables
    are views of one tensor in the module, which a file cannot hold)."""
    return {k: v.clone() for k, v in {**lm.temporal.state_dict(), **lm.depformer.state_dict()}.items()}
