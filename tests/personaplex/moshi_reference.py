"""Kyutai's own generator as the reference of a Moshi session: moshi 0.2.13's `LMGen`, greedy, batch 1.

A Moshi session has no prompt (`prompt.bare`). `LMGen`'s call 0 feeds the all-INIT column 0 (its
input codes are discarded by the delays) and returns nothing; call t >= 1 feeds column t, which
holds the caller's frame t-1 here, and returns one agent frame. The engine's tick k is call k+1.
Upstream's Mimi encodes each caller frame (recording the codes and their nearest-centroid margins)
and decodes each returned frame, streaming from fresh, as moshi's server resets Mimi after the
first frame. Everything lands in a `reference_step.Record`, so one comparison serves both
references: `draws[k]` is call k+1's text and agent cb0..7 (of column k+2), `audio_logits[k]`
its 8 depformer heads.
"""

from __future__ import annotations

import contextlib

import torch
from moshi.models.lm import LMGen

from tests.personaplex import mimi_fixtures, reference_step


@torch.no_grad()
def lmgen_run(lm, codec, frames: torch.Tensor) -> reference_step.Record:  # lm: LMModel, codec: MimiModel
    """`LMGen` over the caller frames [T, 1920]: T live calls after call 0."""
    rec = reference_step.Record()
    text_logits: list[torch.Tensor] = []
    audio_logits: list[torch.Tensor] = []
    draws: list[int] = []

    def keep_audio(_module: torch.nn.Module, _args: object, out: torch.Tensor) -> None:
        audio_logits.append(out[0, 0].float())

    gen = LMGen(lm, use_sampling=False, on_text_logits_hook=lambda lg: text_logits.append(lg[0, 0, 0].float()),
                on_text_hook=lambda t: draws.append(int(t[0])),
                on_audio_hook=lambda a: draws.extend(a[0].tolist()))
    with contextlib.ExitStack() as stack:
        for linear in lm.linears:
            stack.callback(linear.register_forward_hook(keep_audio).remove)
        stack.enter_context(gen.streaming(1))
        stack.enter_context(codec.streaming(1))
        assert gen.step(torch.zeros(1, lm.dep_q, 1, dtype=torch.long)) is None  # call 0: all INIT
        for kept in (text_logits, audio_logits, draws):
            kept.clear()
        for pcm in frames:
            latent = codec._encode_to_unquantized_latent(pcm.view(1, 1, -1))
            codes = codec.quantizer.encode(latent)
            rec.user_codes.append(codes[0, :, 0].tolist())
            rec.code_margins.append(mimi_fixtures.code_margins(codec, latent, codes)[0])
            out = gen.step(codes)
            assert out is not None
            rec.emitted.append(out[0, :, 0].tolist())
            rec.pcm.append(codec.decode(out[:, 1:])[0, 0])
            rec.text_logits.append(text_logits.pop())
            rec.audio_logits.append(torch.stack(audio_logits))
            rec.draws.append(list(draws))
            audio_logits.clear()
            draws.clear()
    return rec
