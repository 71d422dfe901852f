"""The two attention backends (spec personaplex §5.6) agree: the CUDA path's `flash` code, run on
the CPU through `liveplex.bench.counts`' reference kernel, gives `masked`'s tokens."""

from __future__ import annotations

import contextlib

import torch

from liveplex.bench import counts
from liveplex.personaplex import checkpoint, config, prefill, prompt, ring, sampling, step


def _run(lm: checkpoint.LM, backend: ring.Backend, ticks: int) -> tuple[list[list[int]], torch.Tensor]:
    temp, dep = lm.temporal, lm.depformer
    gen = torch.Generator().manual_seed(7)
    pool, state = temp.new_pool(3), step.TokenState.allocate(3)
    offsets = ring.Offsets.of(pool)
    sample = sampling.Sampling()
    silence = prompt.silence_column()
    newcomers = []
    for slot, (frames, role) in enumerate(((3, 4), (6, 1), (2, 9))):
        voice = torch.randn(frames, temp.cfg.dim, generator=gen)
        layout = prompt.layout(voice, silence, silence, list(range(5, 5 + role)), prompt.Schedule.UPSTREAM)
        newcomers.append(prefill.Newcomer(slot, layout, prefill.voice_prefix(temp, voice), seed=slot))
    emitted, logits = [], []
    with counts.count() if backend is ring.Backend.FLASH else contextlib.nullcontext():
        prefill.admit(temp, dep, pool, state, newcomers[:2], prompt.Schedule.UPSTREAM, sample, backend)
        for t in range(ticks):
            if t == 5:  # a late newcomer, rows at different positions from then on
                prefill.admit(temp, dep, pool, state, newcomers[2:], prompt.Schedule.UPSTREAM, sample, backend)
            B = 2 if t < 5 else 3
            user = torch.randint(0, temp.cfg.card, (B, config.AGENT_CODEBOOKS), generator=gen)
            pos = state.pos[:B]
            plan = ring.live_plan(pos, pool, offsets, backend, temp.cfg.context)
            draw = step.sampled_draws(sample, state.key[:B], pos + 1, temp.cfg.text_card, temp.cfg.card)
            out = step.live_step(temp, dep, pool, state, user, prompt.Schedule.UPSTREAM, draw, plan)
            emitted += out.emitted.tolist()
            logits.append(out.text_logits)
    return emitted, torch.cat(logits)


def test_flash_gives_the_masked_tokens_past_the_window():
    lm = checkpoint.random_lm(config.tiny(), seed=3)
    ticks = lm.temporal.cfg.context + 5
    masked, masked_logits = _run(lm, ring.Backend.MASKED, ticks)
    flash, flash_logits = _run(lm, ring.Backend.FLASH, ticks)
    assert flash == masked
    torch.testing.assert_close(flash_logits, masked_logits, rtol=0, atol=1e-4)
