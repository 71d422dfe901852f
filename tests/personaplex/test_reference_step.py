"""Self-check of the test reference against upstream's own generator (spec personaplex §6.5).

The reference step machine (`reference_step.py`) is what the session golden tests trust, so it is
checked against code we did not write: upstream moshi 0.2.13's `LMGen`, on the same tiny weights
sliced to the 8-step (Moshi) depformer layout, greedy, with no prompt. (`LMGen` must never get a
16-step depformer: it would then generate the user channel, spec §6.1.)

The exact relation, under the reference schedule: `LMGen` at call t feeds column t and returns
the frame of column t (text and agent cb0 of column t, agent cb1..7 of column t+1), or None at
call 0. The reference at call o feeds column o-1 and returns that same frame for column o-1, or
None at calls 0 and 1. Fed the same user codes at the same call index (both place call t's codes
at column t + delay), the reference's call t+1 returns exactly `LMGen`'s call t: the same token
grid, one call (80 ms) later. The `upstream` schedule is the one without the lag (D3).
"""

from __future__ import annotations

import torch
from moshi.models.lm import LMGen

from tests.personaplex import reference_step, upstream

FRAMES = 60  # past the tiny 40-position window


@torch.no_grad()
def test_the_reference_emits_at_call_t_plus_1_what_lmgen_emits_at_call_t(lm_checkpoint, upstream_lm):
    cfg = lm_checkpoint.cfg
    lm8 = upstream.build_lm(cfg, dep_q=8)
    lm8.load_state_dict(upstream.eight_step(lm_checkpoint.state, cfg), strict=True)
    user = torch.randint(0, cfg.card, (FRAMES, 8), generator=torch.Generator().manual_seed(5))
    gen_logits: list[torch.Tensor] = []
    lm_gen = LMGen(lm8, use_sampling=False, on_text_logits_hook=lambda lg: gen_logits.append(lg[0, 0, 0].clone()))
    ref = reference_step.Reference(upstream_lm)
    try:
        with lm_gen.streaming(1):
            theirs = [lm_gen.step(user[t].view(1, 8, 1)) for t in range(FRAMES)]
        ours = [ref.step(user=user[t].tolist()) for t in range(FRAMES)]
    finally:
        ref.close()
    assert theirs[0] is None and ours[0] is None and ours[1] is None
    for t in range(1, FRAMES - 1):
        assert ours[t + 1][:9] == theirs[t][0, :, 0].tolist(), f"LMGen call {t}"
    # The reference's logits at its call t+1 are LMGen's at call t, bit for bit (same modules).
    assert torch.equal(torch.stack(ref.rec.text_logits), torch.stack(gen_logits[: FRAMES - 1]))
    # The comparison means something: the agent's text and codes move.
    frames = torch.tensor([theirs[t][0, :, 0].tolist() for t in range(1, FRAMES)])
    assert all(len(set(frames[:, k].tolist())) > 1 for k in range(9))
