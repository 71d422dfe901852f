"""Mimi against upstream moshi 0.2.13, same tiny random weights (spec §6.4).

Tolerances: codes must be equal wherever upstream's nearest-centroid choice is not a float-level
near-tie (relative distance margin above 1e-4), and at least 99 % of codes must qualify; PCM
within 1e-5 absolute (fp32 on the same CPU; outputs are of order 0.1, so that is ~1e-4 relative,
well above reordering noise and far below any real bug).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from liveplex.personaplex import mimi
from liveplex.personaplex.mimi import transformer as mimi_transformer
from tests.personaplex import mimi_fixtures
from tests.personaplex.mimi_fixtures import caller_audio

FRAME = 1920
MARGIN = 1e-4


def test_encode_codes_equal_upstream_past_the_transformer_window(our_mimi, upstream_mimi):
    rows, frames = 2, 140  # 280 steps at 25 Hz: past the 250-step window
    audio = caller_audio(rows, frames, seed=1)
    state = our_mimi.init_state(rows)
    ours, theirs, margins = [], [], []
    with torch.no_grad(), upstream_mimi.streaming(rows):
        for f in range(frames):
            chunk = audio[:, f * FRAME:(f + 1) * FRAME]
            latent = upstream_mimi._encode_to_unquantized_latent(chunk[:, None])
            codes = upstream_mimi.quantizer.encode(latent)
            theirs.append(codes[:, :, 0])
            margins.append(mimi_fixtures.code_margins(upstream_mimi, latent, codes))
            ours.append(our_mimi.encode_step(chunk, state))
    ours_t, theirs_t, margin_t = torch.stack(ours, -1), torch.stack(theirs, -1), torch.stack(margins, -1)
    clear = margin_t > MARGIN
    assert clear.float().mean() >= 0.99, "fixture too close to ties: fewer than 99 % of codes qualify"
    assert torch.equal(ours_t[clear], theirs_t[clear])
    # The comparison means something only if the codes move.
    assert all(len(set(theirs_t[0, q].tolist())) > 1 for q in range(8))


def test_decode_pcm_matches_upstream_for_random_codes(our_mimi, upstream_mimi):
    rows, frames = 2, 140
    codes = torch.randint(0, 2048, (rows, 8, frames), generator=torch.Generator().manual_seed(2))
    state = our_mimi.init_state(rows)
    ours, theirs = [], []
    with torch.no_grad(), upstream_mimi.streaming(rows):
        for f in range(frames):
            theirs.append(upstream_mimi.decode(codes[:, :, f:f + 1])[:, 0])
            ours.append(our_mimi.decode_step(codes[:, :, f], state))
    ours_t, theirs_t = torch.cat(ours, -1), torch.cat(theirs, -1)
    assert theirs_t.std() > 1e-3
    torch.testing.assert_close(ours_t, theirs_t, rtol=0, atol=1e-5)


def _run(model: mimi.Mimi, audio: torch.Tensor, frames: range, state: mimi.MimiState,
         resets: dict[int, list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode each frame, decode the codes just made; reset rows before the frames named in `resets`."""
    codes, pcm = [], []
    for f in frames:
        if f in resets:
            state.reset(resets[f])
        c = model.encode_step(audio[:, f * FRAME:(f + 1) * FRAME], state)
        codes.append(c)
        pcm.append(model.decode_step(c, state))
    return torch.stack(codes, -1), torch.cat(pcm, -1)


def test_batched_rows_with_a_reset_mid_stream_equal_their_own_batch_one_runs(our_mimi):
    # 150 frames: every row, row 1 after its reset too, runs past the 250-step window.
    frames, reset_at = 150, 20
    audio = caller_audio(3, frames, seed=3)
    batched_codes, batched_pcm = _run(our_mimi, audio, range(frames), our_mimi.init_state(3), {reset_at: [1]})
    for row in range(3):
        start = reset_at if row == 1 else 0
        codes, pcm = _run(our_mimi, audio[row:row + 1], range(start, frames), our_mimi.init_state(1), {})
        assert torch.equal(batched_codes[row, :, start:], codes[0])
        torch.testing.assert_close(batched_pcm[row, start * FRAME:], pcm[0], rtol=0, atol=1e-5)
    # Row 1 before its reset was a different stream: the reset really restarted it.
    assert not torch.equal(batched_pcm[1, :FRAME], batched_pcm[1, reset_at * FRAME:(reset_at + 1) * FRAME])


def test_a_row_in_a_bucket_view_advances_the_pool(our_mimi):
    audio = caller_audio(2, 2, seed=4)
    pool = our_mimi.init_state(4)
    alone = our_mimi.init_state(2)
    for f in range(2):
        chunk = audio[:, f * FRAME:(f + 1) * FRAME]
        assert torch.equal(our_mimi.encode_step(chunk, pool.head(2)), our_mimi.encode_step(chunk, alone))
    assert torch.equal(pool.encoder.ring.pos, torch.tensor([4, 4, 0, 0]))
    assert torch.equal(pool.head(2).encoder.ring.kv[0], alone.encoder.ring.kv[0])


def test_encode_rejects_a_wrong_frame_size(our_mimi):
    with pytest.raises(AssertionError, match="1920"):
        our_mimi.encode_step(torch.zeros(1, 960), our_mimi.init_state(1))


@given(pos=st.lists(st.integers(0, 2000), min_size=1, max_size=4), T=st.integers(1, 4), context=st.integers(1, 300))
def test_the_transformer_window_is_the_ring_written_out(pos, T, context):
    """Slot j holds the latest position `k = last - ((last - j) mod context)` written; query q sees
    it when it was written (k >= 0) and `0 <= q - k < context` (upstream's `RingKVCache`)."""
    steps = torch.arange(T)
    q_pos = torch.tensor(pos)[:, None] + steps
    last = q_pos[:, -1:]
    held = last - torch.remainder(last - torch.arange(context), context)  # [B, context]
    distance = q_pos[:, :, None] - held[:, None, :]
    expected = (held[:, None, :] >= 0) & (distance >= 0) & (distance < context)
    assert torch.equal(mimi_transformer.window(q_pos, steps, context), expected[:, None])
