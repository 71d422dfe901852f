"""Module parity with upstream moshi 0.2.13 in fp32 (spec personaplex §6.4).

Tolerance: rtol = atol = 1e-4. Both sides run the same fp32 operations in the same order except
for matmul blocking and the attention kernel's reduction order, which differ by a few ulps per
layer (~1e-6 relative); 1e-4 leaves two orders of margin while still catching any real error (a
wrong position, slot, mask or weight changes outputs by O(1)).
"""

from __future__ import annotations

import pytest
import torch

from liveplex.personaplex import checkpoint, temporal

TOL = {"rtol": 1e-4, "atol": 1e-4}


@pytest.fixture(scope="module")
def ours(lm_checkpoint):
    return checkpoint.load_lm(lm_checkpoint.path, lm_checkpoint.cfg, steps=16)


def _random_columns(cfg, batch: int, frames: int, seed: int) -> torch.Tensor:
    """[B, 17, T] random token columns: text ids below the INIT id, audio ids below card."""
    gen = torch.Generator().manual_seed(seed)
    text = torch.randint(0, cfg.text_card, (batch, 1, frames), generator=gen)
    audio = torch.randint(0, cfg.card, (batch, cfg.n_q, frames), generator=gen)
    return torch.cat([text, audio], dim=1)


@torch.no_grad()
def _upstream_temporal(lm, codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream streaming, frame by frame: (h after out_norm [B, T, dim], text logits [B, T, V])."""
    hs, logits = [], []
    with lm.streaming(codes.shape[0]):
        for t in range(codes.shape[2]):
            h, lg = lm.forward_text(codes[:, :, t:t + 1])
            hs.append(h[:, 0])
            logits.append(lg[:, 0, 0])
    return torch.stack(hs, 1), torch.stack(logits, 1)


@torch.no_grad()
def test_temporal_step_matches_upstream_past_the_window(ours, upstream_lm, lm_checkpoint):
    cfg = lm_checkpoint.cfg
    frames = 60
    assert frames > cfg.context
    codes = _random_columns(cfg, 2, frames, seed=1)
    ref_h, ref_logits = _upstream_temporal(upstream_lm, codes)
    pool = ours.temporal.new_pool(2)
    for t in range(frames):
        x = ours.temporal.embed(codes[:, :, t])
        h = ours.temporal.step(x, torch.tensor([t, t]), pool)
        torch.testing.assert_close(h, ref_h[:, t], **TOL, msg=f"h at frame {t}")
        torch.testing.assert_close(ours.temporal.text_logits(h), ref_logits[:, t], **TOL, msg=f"logits at {t}")


@torch.no_grad()
def test_rows_at_different_positions_match_their_own_runs(ours, lm_checkpoint):
    """Row 1 starts 17 frames after row 0: per-row positions and rings keep them independent.

    Not bit for bit: CPU matmuls of 1 and 2 rows use different kernels (GEMV vs GEMM), which
    differ by ~5e-6; 1e-5 still catches any cross-row leak, which is O(1).
    """
    cfg = lm_checkpoint.cfg
    frames, lag = 50, 17
    codes = _random_columns(cfg, 2, frames, seed=2)
    alone = []
    for row in range(2):
        pool = ours.temporal.new_pool(1)
        alone.append(torch.cat([ours.temporal.step(ours.temporal.embed(codes[row:row + 1, :, t]),
                                                   torch.tensor([t]), pool) for t in range(frames)]))
    pool = ours.temporal.new_pool(2)
    for t in range(lag, frames):
        pos = torch.tensor([t, t - lag])
        if t == lag:  # row 0's first `lag` frames, alone in slot 0
            for u in range(lag):
                ours.temporal.step(ours.temporal.embed(codes[0:1, :, u]), torch.tensor([u]), pool)
        cols = torch.stack([codes[0, :, t], codes[1, :, t - lag]])
        h = ours.temporal.step(ours.temporal.embed(cols), pos, pool)
        torch.testing.assert_close(h[0], alone[0][t], rtol=0, atol=1e-5)
        torch.testing.assert_close(h[1], alone[1][t - lag], rtol=0, atol=1e-5)


@torch.no_grad()
def test_multi_row_prefill_matches_row_by_row(ours, lm_checkpoint):
    cfg = lm_checkpoint.cfg
    codes = _random_columns(cfg, 1, 30, seed=3)[0].T  # [30, 17]
    pool = ours.temporal.new_pool(1)
    stepped = torch.cat([ours.temporal.step(ours.temporal.embed(codes[t:t + 1]), torch.tensor([t]), pool)
                         for t in range(30)])
    pool_rows = ours.temporal.new_pool(1)
    together = ours.temporal.forward_rows(ours.temporal.embed(codes), [temporal.Segment(0, 0, 30)], pool_rows)
    torch.testing.assert_close(together, stepped, **TOL)
    torch.testing.assert_close(pool.k, pool_rows.k, **TOL)
    torch.testing.assert_close(pool.v, pool_rows.v, **TOL)


@torch.no_grad()
def test_a_prefill_in_chunks_matches_row_by_row_and_a_chunk_never_crosses_the_ring_end(ours, lm_checkpoint):
    """Rows 0..22 then 23..38 of a 40-slot ring (chunked prefill): the second chunk reads the first
    one's keys from the ring. A prompt always fits the window, so no chunk crosses the ring's end."""
    cfg = lm_checkpoint.cfg
    codes = _random_columns(cfg, 1, 39, seed=4)[0].T
    pool = ours.temporal.new_pool(1)
    stepped = torch.cat([ours.temporal.step(ours.temporal.embed(codes[t:t + 1]), torch.tensor([t]), pool)
                         for t in range(39)])
    pool_rows = ours.temporal.new_pool(1)
    first = ours.temporal.forward_rows(ours.temporal.embed(codes[:23]), [temporal.Segment(0, 0, 23)], pool_rows)
    rest = ours.temporal.forward_rows(ours.temporal.embed(codes[23:]), [temporal.Segment(0, 23, 16)], pool_rows)
    torch.testing.assert_close(torch.cat([first, rest]), stepped, **TOL)
    with pytest.raises(AssertionError, match="cross the ring"):
        ours.temporal.forward_rows(ours.temporal.embed(codes[:6]), [temporal.Segment(0, 35, 6)], pool_rows)


@torch.no_grad()
def test_depformer_all_16_steps_teacher_forced_match_upstream(ours, upstream_lm, lm_checkpoint):
    cfg = lm_checkpoint.cfg
    codes = _random_columns(cfg, 2, 6, seed=5)
    hs, _ = _upstream_temporal(upstream_lm, codes)
    gen = torch.Generator().manual_seed(6)
    for t in range(hs.shape[1]):
        h = hs[:, t]
        text = torch.randint(0, cfg.text_card, (2,), generator=gen)
        forced = torch.randint(0, cfg.card, (2, 16), generator=gen)
        prevs = [text] + [forced[:, s] for s in range(15)]
        kv = ours.depformer.new_frame(2)
        with upstream_lm.depformer.streaming(2):
            for s in range(16):
                ref = upstream_lm.forward_depformer(s, prevs[s][:, None, None], h[:, None])[:, 0, 0]
                got = ours.depformer.step(s, h, prevs[s], kv)
                torch.testing.assert_close(got, ref, **TOL, msg=f"frame {t} step {s}")
