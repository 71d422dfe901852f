"""A tiny PersonaPlex checkpoint directory with random weights: `liveplex personaplex make-tiny DIR`.

The directory has the real layout (spec personaplex §2.1): `model.safetensors` (tiny LM, real key
names, 16 depformer steps), the Mimi safetensors (tiny codec), `tokenizer_spm_32k_3.model` (a
SentencePiece model trained here on a generated corpus, with control ids 0..3 and byte pieces
4..259 like the real one) and `voices/NATF2.pt`, `voices/NATM1.pt`. Under the Moshi convention
(`--moshi`) it has Kyutai Moshi's layout instead: 8 depformer steps, no voices, and a `config.json`
of moshi's LM kwargs. It lets the whole path run on a laptop without the real weights;
`model_dir.load(DIR)` loads it like the real directory.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import safetensors.torch
import torch

from liveplex.personaplex import architecture, checkpoint, config, mimi, prompt, tiny_tokenizer, tokenizer
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint


def _voice(cfg: config.LMConfig, frames: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A `.pt` voice (spec §4.2): random embeddings and a token ring holding columns N and N+1."""
    cache = torch.full((1, config.NUM_STREAMS, 4), cfg.card, dtype=torch.long)
    for c in (frames, frames + 1):
        cache[0, 0, c % 4] = config.TEXT_PAD
        cache[0, 1:9, c % 4] = torch.randint(0, cfg.card, (8,), generator=gen)
        cache[0, 9:, c % 4] = torch.tensor(config.SINE)
    return {"embeddings": torch.randn(frames, 1, 1, cfg.dim, generator=gen) / cfg.dim ** 0.5, "cache": cache}


def make_tiny(directory: pathlib.Path, seed: int = 0,
              convention: prompt.Convention = prompt.Convention.PERSONAPLEX, *,
              lm: config.LMConfig | None = None, codec: mimi.MimiConfig | None = None) -> None:
    """Write the complete tiny checkpoint directory (see the module docstring); `lm` and `codec`:
    other sizes than the tiny ones, in the same layout (and with no `config.json`, as NVIDIA's)."""
    cfg = lm or config.tiny()
    directory.mkdir(parents=True, exist_ok=True)
    if convention is prompt.Convention.MOSHI:
        cfg = dataclasses.replace(cfg, dep_steps=config.AGENT_CODEBOOKS)
        (directory / architecture.CONFIG_FILE).write_text(json.dumps(architecture.to_moshi_kwargs(cfg), indent=2))
    model = checkpoint.random_lm(cfg, seed, steps=cfg.dep_steps)
    safetensors.torch.save_file(checkpoint.lm_state(model), str(directory / checkpoint.LM_FILE))
    mimi.write_random(directory / mimi_checkpoint.FILE_NAME, codec or mimi.tiny_config(), seed=seed)
    (directory / tokenizer.FILE_NAME).write_bytes(tiny_tokenizer.train(tiny_tokenizer.sample_corpus(seed=seed)))
    if convention is prompt.Convention.MOSHI:
        return
    voices = directory / "voices"
    voices.mkdir(exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    for name, frames in (("NATF2", 5), ("NATM1", 7)):
        torch.save(_voice(cfg, frames, gen), voices / f"{name}.pt")
