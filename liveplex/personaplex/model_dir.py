"""Loading a whole checkpoint directory in one call: LM, Mimi, tokenizer, voices, prompt convention, limit.

The directory has the real layout (spec personaplex §2.1): `model.safetensors`,
`tokenizer-e351c8d8-checkpoint125.safetensors` (Mimi), `tokenizer_spm_32k_3.model`, `voices/` or
else `voices.tgz` (PersonaPlex only), and optionally `config.json`. Both architectures are derived
from the checkpoint itself: the LM's from its tensor shapes and what `config.json` gives (a partial
file gives those values, the rest derived as without it: `architecture`), Mimi's from its own
shapes (`mimi.architecture`), the same with or without the file. The prompt convention
follows from the LM: 16 depformer steps are PersonaPlex; 8 are Kyutai's Moshi (no prompt, no
voices), unless voices are there (a PersonaPlex file in Moshi's layout, D2: served as PersonaPlex,
with a warning). `liveplex personaplex make-tiny` output loads through the same call as the real
files. The context window is a serving choice, not a property of the weights, so it may be
overridden.

Order (spec §2.5, §5.2): every required file is checked for presence, `config.json` is read, both
architectures are derived and both safetensors headers checked against them, all before any tensor
is allocated; every problem found is reported together in one `CheckpointError`, each saying what
to give (a `config.json` key, a tensor's shape, a file). Then the LM (8 resident depformer steps by default),
Mimi (fp32), the tokenizer and the voices load, and the role-prompt limit is derived from the
longest voice (D5).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import torch

from liveplex.personaplex import (
    architecture,
    checkpoint,
    config,
    errors,
    mimi,
    prompt,
    tokenizer,
    voices,
)
from liveplex.personaplex.mimi import architecture as mimi_architecture
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint

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
    """The LM's named architecture (`personaplex-7b`, `small`, `tiny`) or `custom`."""
    cfg: config.LMConfig
    """Its numbers, with the served context."""
    lm: checkpoint.LM
    codec: mimi.Mimi
    """Mimi, fp32 on every device; `codec.cfg` is the architecture its file's shapes give."""
    tokenizer: tokenizer.Tokenizer
    voices: dict[str, voices.Voice]
    """Every voice by file stem (`NATF2`), custom voices included; none for Moshi."""
    max_instructions_chars: int
    """Role-prompt character limit for the longest loaded voice (D5): 715 for 50 frames; 0 for Moshi."""
    convention: prompt.Convention
    """How its sessions are prompted."""


_NAMED_FILES = {"moshi_name": checkpoint.LM_FILE, "mimi_name": mimi_checkpoint.FILE_NAME,
                "tokenizer_name": tokenizer.FILE_NAME}
"""moshi's `config.json` file-name keys and the one name liveplex reads for each."""


def _required(directory: Path) -> list[str]:
    """A problem per required file that is absent (voices are judged once the LM is known)."""
    return [
        f"{directory}: `{name}` is missing; give the checkpoint's file of that name"
        for name in (checkpoint.LM_FILE, mimi_checkpoint.FILE_NAME, tokenizer.FILE_NAME)
        if not (directory / name).is_file()
    ]


def _has_voices(directory: Path) -> bool:
    return (directory / "voices").is_dir() or (directory / "voices.tgz").is_file()


def read_config(directory: Path) -> tuple[dict[str, object] | None, list[str]]:
    """`config.json` as moshi's LM kwargs (None when absent) and what is wrong with it."""
    path = directory / architecture.CONFIG_FILE
    if not path.is_file():
        return None, []
    try:
        kwargs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [f"{path.name}: not readable JSON ({exc})"]
    if not isinstance(kwargs, dict):
        return None, [f"{path.name}: expected a JSON object of moshi LM kwargs, got {type(kwargs).__name__}"]
    problems = [f"{path.name}: `{key}` names `{kwargs[key]}`; liveplex reads `{name}` (rename the file)"
                for key, name in _NAMED_FILES.items() if kwargs.get(key, name) != name]
    return kwargs, problems


def _shapes(path: Path) -> tuple[dict[str, tuple[int, ...]] | None, list[str]]:
    """A safetensors file's tensor shapes, or None: absent (`_required` says so) or unreadable (why)."""
    if not path.is_file():
        return None, []
    try:
        return checkpoint.shapes(checkpoint.read_header(path)), []
    except errors.CheckpointError as exc:
        return None, list(exc.problems)


def _derive(directory: Path, kwargs: dict[str, object] | None,
            has_voices: bool) -> tuple[architecture.Derived | None, list[str]]:
    """The LM's architecture from `config.json` and the header, and every problem with either."""
    lm_path = directory / checkpoint.LM_FILE
    shapes, unreadable = _shapes(lm_path)
    if shapes is None:
        return None, unreadable
    derived = architecture.derive(shapes, lm_path.name, kwargs)
    problems = list(derived.problems)
    if derived.cfg is not None and derived.cfg.dep_steps != config.AGENT_CODEBOOKS and not has_voices:
        problems.append(f"{directory}: neither `voices/` nor `voices.tgz` is there "
                        f"(a {derived.cfg.dep_steps}-step PersonaPlex checkpoint needs its voices: give them)")
    return derived, problems


def _derive_mimi(path: Path, kwargs: dict[str, object] | None) -> tuple[mimi_architecture.Derived | None, list[str]]:
    """Mimi's architecture from its own header (`config.json` may only add its heads)."""
    shapes, unreadable = _shapes(path)
    if shapes is None:
        return None, unreadable
    derived = mimi_architecture.derive(shapes, path.name, kwargs)
    return derived, list(derived.problems)


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
    the checkpoint's, 3000 for the real models); steps: resident depformer steps (8 live, 16 for
    diagnostics). Raises `CheckpointError` (or its subclasses `MimiCheckpointError`,
    `VoiceError`) naming the file and every missing or misshaped tensor, config key, or the voice
    and field.
    """
    directory = Path(directory)
    has_voices = _has_voices(directory)
    lm_path, mimi_path = directory / checkpoint.LM_FILE, directory / mimi_checkpoint.FILE_NAME
    kwargs, config_problems = read_config(directory)
    derived, lm_problems = _derive(directory, kwargs, has_voices)
    derived_mimi, mimi_problems = _derive_mimi(mimi_path, kwargs)
    problems = _required(directory) + config_problems + lm_problems + mimi_problems
    cfg = None if derived is None or derived.cfg is None else (
        derived.cfg if context is None else derived.cfg.with_context(context))
    mimi_cfg = None if derived_mimi is None else derived_mimi.cfg
    if cfg is not None and mimi_cfg is not None and cfg.card != mimi_cfg.bins:
        problems.append(f"{lm_path.name}: audio vocabulary {cfg.card} (`card`) differs from Mimi's "
                        f"{mimi_cfg.bins}-entry codebooks; give the LM and Mimi files of one checkpoint")
    try:  # each header against its architecture once that is sound (else it would list every tensor)
        if cfg is not None and not config_problems and not lm_problems:
            checkpoint.validate_lm(lm_path, cfg)
    except errors.CheckpointError as exc:
        problems += exc.problems
    try:
        if mimi_cfg is not None and not mimi_problems:
            mimi_checkpoint.validate(mimi_path, mimi_cfg)
    except errors.CheckpointError as exc:
        problems += exc.problems
    if problems:
        raise errors.CheckpointError(*problems)
    assert derived is not None and cfg is not None and derived_mimi is not None and mimi_cfg is not None
    convention = (prompt.Convention.MOSHI if cfg.dep_steps == config.AGENT_CODEBOOKS and not has_voices
                  else prompt.Convention.PERSONAPLEX)
    if convention is prompt.Convention.MOSHI and custom_voices_dir is not None:
        raise errors.CheckpointError(f"{custom_voices_dir}: a Moshi checkpoint takes no voice prompts; "
                                     "its voice is its weights' own: give no custom voices")
    notes = [*derived.notes, *derived_mimi.notes]
    if notes:
        logger.warning("checkpoint architecture: values assumed or ignored",
                       extra={"file": str(lm_path), "source": derived.source, "notes": notes})
    if convention is prompt.Convention.PERSONAPLEX and cfg.dep_steps == config.AGENT_CODEBOOKS:
        logger.warning("checkpoint has the Moshi depformer layout and voices: served as PersonaPlex, "
                       "but it may not be a PersonaPlex checkpoint (D2)", extra={"directory": str(directory)})

    lm = checkpoint.load_lm(lm_path, cfg, steps=steps, device=device, dtype=dtype)
    codec = mimi.load(mimi_path, device, mimi_cfg)
    tok = _tokenizer(directory / tokenizer.FILE_NAME, cfg)
    found, limit = {}, 0
    if convention is prompt.Convention.PERSONAPLEX:
        found, limit = _voices(directory, cfg, lm, codec, max_voice_frames, custom_voices_dir)
    logger.info("checkpoint directory loaded", extra={
        "directory": str(directory), "architecture": derived.name, "architecture_source": derived.source,
        "convention": convention.value, "context": cfg.context, "text_card": cfg.text_card, "mimi": derived_mimi.name,
        "file_steps": lm.file_steps, "stored_dtypes": lm.stored_dtypes, "device": str(device), "dtype": str(dtype),
        "voices": {v.name: v.frames for v in found.values()}, "max_instructions_chars": limit})
    return Model(derived.name, cfg, lm, codec, tok, found, limit, convention)


def _voices(directory: Path, cfg: config.LMConfig, lm: checkpoint.LM, codec: mimi.Mimi, max_voice_frames: int,
            custom_voices_dir: Path | None) -> tuple[dict[str, voices.Voice], int]:
    """PersonaPlex's voices and the role-prompt limit their longest one leaves (D5)."""
    found = voices.load_voices(directory, cfg=cfg, max_frames=max_voice_frames, custom_dir=custom_voices_dir,
                               wav=voices.WavConverter(codec, lm.temporal.embed))
    if not found:
        raise voices.VoiceError(f"{directory}: no voice (`.pt` in voices/ or voices.tgz)")
    too_long = [f"voice {v.name!r}: N = {v.frames} frames leaves no room for a prompt in a context of "
                f"{cfg.context} (at most {cfg.context - PROMPT_OVERHEAD_FRAMES})"
                for v in found.values() if v.frames + PROMPT_OVERHEAD_FRAMES > cfg.context]
    if too_long:
        raise voices.VoiceError(*too_long)
    return found, prompt.max_instructions_chars(cfg.context, max(v.frames for v in found.values()))
