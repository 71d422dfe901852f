"""Loading a whole checkpoint directory in one call: LM, Mimi, tokenizer, voices and the prompt limit.

The directory has the real layout (spec personaplex §2.1): `model.safetensors`,
`tokenizer-e351c8d8-checkpoint125.safetensors` (Mimi), `tokenizer_spm_32k_3.model`, and `voices/`
or else `voices.tgz`. `config.json` is never read: the architecture is recognised from the LM
header as the closest of the named configs (`personaplex-7b`, `small`, `tiny`; Mimi among `mimi`,
`tiny`), so
`liveplex personaplex make-tiny` output loads through the same call as the real files. The
context window is a serving choice, not a property of the weights, so it may be overridden.

Order (spec §2.5, §5.2): every required file is checked for presence first, then both safetensors
headers, all before any tensor is allocated; every problem found at a stage is reported together
in one `CheckpointError`. Then the LM (8 resident depformer steps by default), Mimi (fp32), the
tokenizer and the voices load, and the role-prompt limit is derived from the longest voice (D5).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import torch

from liveplex.personaplex import (
    checkpoint,
    config,
    errors,
    mimi,
    prompt,
    tokenizer,
    voices,
)
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint
from liveplex.personaplex.mimi import config as mimi_configs

logger = logging.getLogger(__name__)

MAX_VOICE_FRAMES = 250
"""Longest voice prompt accepted (20 s), spec §5.1 `max_voice_frames`."""
PROMPT_OVERHEAD_FRAMES = 2 * prompt.SILENCE_FRAMES + 2
"""Positions a prompt needs besides the voice and the role text, with the first live row:
N + 12 + L <= context - 2 (spec §4.4). A voice longer than context - 14 cannot take even L = 0."""


@dataclasses.dataclass(frozen=True, slots=True)
class Model:
    """Everything the engine needs from a checkpoint directory, resident on one device."""

    name: str
    """The recognised LM architecture (`personaplex-7b`, `small`, `tiny`)."""
    cfg: config.LMConfig
    """Its numbers, with the served context."""
    lm: checkpoint.LM
    codec: mimi.Mimi
    """Mimi, fp32 on every device; `codec.cfg` is its recognised config."""
    tokenizer: tokenizer.Tokenizer
    voices: dict[str, voices.Voice]
    """Every voice by file stem (`NATF2`), custom voices included."""
    max_instructions_chars: int
    """Role-prompt character limit for the longest loaded voice (D5): 715 for 50 frames."""


def _required(directory: Path) -> list[str]:
    """A problem per required file that is absent."""
    problems = [
        f"{directory}: `{name}` is missing"
        for name in (checkpoint.LM_FILE, mimi_checkpoint.FILE_NAME, tokenizer.FILE_NAME)
        if not (directory / name).is_file()
    ]
    if not (directory / "voices").is_dir() and not (directory / "voices.tgz").is_file():
        problems.append(f"{directory}: neither `voices/` nor `voices.tgz` is there")
    return problems


def _recognise_lm(path: Path) -> tuple[str, config.LMConfig]:
    """The named config closest to the header (fewest problems, 16- or 8-step layout): an exact fit
    when the file is sound, else the one whose problems are then listed, not a flood of them."""
    header = checkpoint.read_header(path)

    def problems(cfg: config.LMConfig) -> int:
        return min(len(checkpoint.check_header("", header, checkpoint.expected_lm(cfg, steps)))
                   for steps in (cfg.dep_steps, config.AGENT_CODEBOOKS))

    name = min(config.CONFIGS, key=lambda n: problems(config.CONFIGS[n]()))
    return name, config.CONFIGS[name]()


def _recognise_mimi(path: Path) -> tuple[str, mimi.MimiConfig]:
    """As `_recognise_lm`, among Mimi's named configs."""
    header = checkpoint.read_header(path)

    def problems(cfg: mimi.MimiConfig) -> int:
        return sum(key not in header or header[key].shape != shape for key, shape in mimi.expected_tensors(cfg).items())

    name = min(mimi_configs.CONFIGS, key=lambda n: problems(mimi_configs.CONFIGS[n]()))
    return name, mimi_configs.CONFIGS[name]()


def _tokenizer(path: Path, cfg: config.LMConfig) -> tokenizer.Tokenizer:
    try:
        tok = tokenizer.Tokenizer.load(path)
    except (OSError, RuntimeError) as exc:  # sentencepiece reports a bad model file as either
        raise errors.CheckpointError(f"{path.name}: not a readable SentencePiece model ({exc})") from None
    pieces = tok.processor.get_piece_size()
    if pieces > cfg.text_card:
        raise errors.CheckpointError(
            f"{path.name}: {pieces} pieces, more than the model's text vocabulary of {cfg.text_card}")
    return tok


def load(directory: str | Path, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
         context: int | None = None, steps: int = config.AGENT_CODEBOOKS,
         max_voice_frames: int = MAX_VOICE_FRAMES, custom_voices_dir: Path | None = None) -> Model:
    """Load and validate a checkpoint directory onto `device`.

    dtype: the LM's weights and KV (Mimi is always fp32); context: the window in positions (None:
    the recognised config's, 3000 for the real model); steps: resident depformer steps (8 live,
    16 for diagnostics). Raises `CheckpointError` (or its subclasses `MimiCheckpointError`,
    `VoiceError`) naming the file and every missing or misshaped tensor, or the voice and field.
    """
    directory = Path(directory)
    problems = _required(directory)
    if problems:
        raise errors.CheckpointError(*problems)
    lm_path, mimi_path = directory / checkpoint.LM_FILE, directory / mimi_checkpoint.FILE_NAME
    name, cfg = _recognise_lm(lm_path)
    if context is not None:
        cfg = cfg.with_context(context)
    mimi_name, mimi_cfg = _recognise_mimi(mimi_path)
    validations = (lambda: checkpoint.validate_lm(lm_path, cfg), lambda: mimi_checkpoint.validate(mimi_path, mimi_cfg))
    for validate in validations:
        try:
            validate()
        except errors.CheckpointError as exc:
            problems += exc.problems
    if problems:
        raise errors.CheckpointError(*problems)

    lm = checkpoint.load_lm(lm_path, cfg, steps=steps, device=device, dtype=dtype)
    codec = mimi.load(mimi_path, device, mimi_cfg)
    tok = _tokenizer(directory / tokenizer.FILE_NAME, cfg)
    found = voices.load_voices(directory, dim=cfg.dim, max_frames=max_voice_frames, custom_dir=custom_voices_dir,
                               wav=voices.WavConverter(codec, lm.temporal.embed))
    if not found:
        raise voices.VoiceError(f"{directory}: no voice (`.pt` in voices/ or voices.tgz)")
    too_long = [f"voice {v.name!r}: N = {v.frames} frames leaves no room for a prompt in a context of "
                f"{cfg.context} (at most {cfg.context - PROMPT_OVERHEAD_FRAMES})"
                for v in found.values() if v.frames + PROMPT_OVERHEAD_FRAMES > cfg.context]
    if too_long:
        raise voices.VoiceError(*too_long)
    limit = prompt.max_instructions_chars(cfg.context, max(v.frames for v in found.values()))
    logger.info("checkpoint directory loaded", extra={
        "directory": str(directory), "architecture": name, "context": cfg.context, "mimi": mimi_name,
        "file_steps": lm.file_steps, "stored_dtypes": lm.stored_dtypes, "device": str(device), "dtype": str(dtype),
        "voices": {v.name: v.frames for v in found.values()}, "max_instructions_chars": limit})
    return Model(name, cfg, lm, codec, tok, found, limit)
