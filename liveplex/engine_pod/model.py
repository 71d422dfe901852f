"""The checkpoint directory as the engine loads it: `personaplex.model_dir.load` with our settings.

Spec personaplex §2, §5.2. The model package recognises the architecture from the LM header and
loads LM (8 resident depformer steps), Mimi, tokenizer and voices in one call; the context window
is a serving setting. Load failures become `StartupError`, a `ValueError`, so `liveplex serve`
exits before readiness with the model package's message (file, key, voice).
"""

from __future__ import annotations

from pathlib import Path

import torch

from liveplex.personaplex import errors, kv8, model_dir

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KV_DTYPES = {**DTYPES, "fp8": kv8.FP8}
"""The KV ring's dtypes: the weights' own, or e4m3 with fixed scales (`personaplex.kv8`, issue 36)."""

Model = model_dir.Model


class StartupError(ValueError):
    """The checkpoint directory cannot be served; the message names the file, key or voice."""


def load(directory: Path, *, device: str, dtype: str, context_frames: int, max_voice_frames: int,
         custom_voices_dir: Path | None = None) -> Model:
    """Load and validate a checkpoint directory onto `device`, frozen for inference."""
    try:
        loaded = model_dir.load(directory, device=device, dtype=DTYPES[dtype], context=context_frames,
                                max_voice_frames=max_voice_frames, custom_voices_dir=custom_voices_dir)
    except errors.CheckpointError as exc:
        raise StartupError(str(exc)) from exc
    for module in (loaded.lm.temporal, loaded.lm.depformer, loaded.codec):
        module.requires_grad_(False)
    return loaded
