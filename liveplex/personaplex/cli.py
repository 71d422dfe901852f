"""`liveplex personaplex`: model tools. `make-tiny DIR` writes a random checkpoint directory.

The directory has the real layout (spec personaplex §2.1): `model.safetensors` (tiny LM, real key
names, 16 depformer steps), the Mimi safetensors (tiny codec), `tokenizer_spm_32k_3.model` (a
SentencePiece model trained here on a generated corpus, with control ids 0..3 and byte pieces
4..259 like the real one) and `voices/NATF2.pt`, `voices/NATM1.pt`. It lets the whole path run on
a laptop without the gated weights; `model_dir.load(DIR)` loads it like the real directory.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import safetensors.torch
import torch

from liveplex.personaplex import checkpoint, config, mimi, tiny_tokenizer, tokenizer


def _voice(cfg: config.LMConfig, frames: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A `.pt` voice (spec §4.2): random embeddings and a token ring holding columns N and N+1."""
    cache = torch.full((1, config.NUM_STREAMS, 4), config.AUDIO_INIT, dtype=torch.long)
    for c in (frames, frames + 1):
        cache[0, 0, c % 4] = config.TEXT_PAD
        cache[0, 1:9, c % 4] = torch.randint(0, cfg.card, (8,), generator=gen)
        cache[0, 9:, c % 4] = torch.tensor(config.SINE)
    return {"embeddings": torch.randn(frames, 1, 1, cfg.dim, generator=gen) / cfg.dim ** 0.5, "cache": cache}


def make_tiny(directory: pathlib.Path, seed: int = 0) -> None:
    """Write the complete tiny checkpoint directory (see the module docstring)."""
    cfg = config.tiny()
    directory.mkdir(parents=True, exist_ok=True)
    lm = checkpoint.random_lm(cfg, seed, steps=cfg.dep_steps)
    safetensors.torch.save_file(checkpoint.lm_state(lm), str(directory / checkpoint.LM_FILE))
    mimi.write_random(directory / mimi.checkpoint.FILE_NAME, mimi.tiny_config(), seed=seed)
    (directory / tokenizer.FILE_NAME).write_bytes(tiny_tokenizer.train(tiny_tokenizer.sample_corpus(seed=seed)))
    voices = directory / "voices"
    voices.mkdir(exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    for name, frames in (("NATF2", 5), ("NATM1", 7)):
        torch.save(_voice(cfg, frames, gen), voices / f"{name}.pt")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="liveplex personaplex", description="PersonaPlex model tools")
    sub = parser.add_subparsers(dest="command", required=True)
    tiny = sub.add_parser("make-tiny", help="write a random tiny checkpoint directory in the real layout")
    tiny.add_argument("directory", type=pathlib.Path)
    tiny.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "make-tiny":
        make_tiny(args.directory, args.seed)
        print(f"wrote a tiny PersonaPlex checkpoint to {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
