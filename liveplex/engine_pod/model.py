"""Everything the engine loads from a checkpoint directory, in one call (spec personaplex §2, §5.2).

Composes the model package's loaders: the LM (8 resident depformer steps), Mimi, the tokenizer and
the voices. The architecture is recognised from the LM file's header among the named configs
(`personaplex-7b`, `small`, `tiny`); the context window is a serving setting, not a property of
the weights. To be replaced by the model package's directory loader once it lands.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from liveplex.personaplex import checkpoint, config, mimi, tokenizer, voices
from liveplex.personaplex.cli import TOKENIZER_FILE

logger = logging.getLogger(__name__)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class StartupError(ValueError):
    """The checkpoint directory cannot be served; the message names the file, key or voice."""


@dataclass(frozen=True, slots=True)
class Model:
    """A loaded checkpoint, resident on one device."""

    name: str
    """The recognised architecture (`personaplex-7b`, `small`, `tiny`)."""
    cfg: config.LMConfig
    lm: checkpoint.LM
    codec: mimi.Mimi
    tokenizer: tokenizer.Tokenizer
    voices: dict[str, voices.Voice]


def _lm_config(path: Path) -> tuple[str, config.LMConfig]:
    header = checkpoint.read_header(path)
    for name, make in config.CONFIGS.items():
        cfg = make()
        for steps in (cfg.dep_steps, config.AGENT_CODEBOOKS):
            if not checkpoint.check_header(path.name, header, checkpoint.expected_lm(cfg, steps)):
                return name, cfg
    return "personaplex-7b", config.personaplex_7b()  # load_lm then lists every mismatch


def _mimi_config(path: Path) -> mimi.MimiConfig:
    header = checkpoint.read_header(path)
    for make in mimi.config.CONFIGS.values():
        cfg = make()
        expected = mimi.expected_tensors(cfg)
        if all(k in header and header[k].shape == s for k, s in expected.items()):
            return cfg
    return mimi.mimi_config()  # mimi.load then lists every mismatch


def load(model_dir: Path, *, device: str, dtype: str, context_frames: int, max_voice_frames: int,
         custom_voices_dir: Path | None = None) -> Model:
    """Load and validate a checkpoint directory; raises `StartupError` naming what is wrong."""
    lm_path = model_dir / checkpoint.LM_FILE
    mimi_path = model_dir / mimi.checkpoint.FILE_NAME
    try:
        name, cfg = _lm_config(lm_path)
        cfg = cfg.with_context(context_frames)
        lm = checkpoint.load_lm(lm_path, cfg, device=device, dtype=DTYPES[dtype])
        codec = mimi.load(mimi_path, device, _mimi_config(mimi_path))
        tok = tokenizer.Tokenizer.load(_existing(model_dir / TOKENIZER_FILE))
        found = voices.load_voices(
            model_dir, dim=cfg.dim, max_frames=max_voice_frames, custom_dir=custom_voices_dir,
            wav=voices.WavConverter(codec, lm.temporal.embed))
    except (checkpoint.CheckpointError, mimi.MimiCheckpointError, voices.VoiceError, OSError) as exc:
        raise StartupError(str(exc)) from exc
    if not found:
        raise StartupError(f"{model_dir}: no voices (expected voices/*.pt or voices.tgz)")
    longest = max(v.frames for v in found.values())
    if longest + 15 > cfg.context:
        raise StartupError(f"a voice of {longest} frames does not fit a context of {cfg.context} positions")
    for module in (lm.temporal, lm.depformer, codec):
        module.requires_grad_(False)
    return Model(name, cfg, lm, codec, tok, found)


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise StartupError(f"{path}: file not found")
    return path
