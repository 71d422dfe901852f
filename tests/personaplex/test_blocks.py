"""The shared blocks and the tables derived once per model (issue 14): RoPE and the embeddings."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.personaplex import blocks, checkpoint, config, temporal


@settings(max_examples=25, deadline=None)
@given(positions=st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=5), seed=st.integers(0, 2 ** 16))
def test_rope_rotates_q_and_k_as_upstream_and_carries_v_bit_for_bit(positions, seed):
    D = 16
    rotary = blocks.Rotary(D, 10000.0)
    x = torch.randn(len(positions), 3, 2, D, generator=torch.Generator().manual_seed(seed))
    out = blocks.rope(x, rotary.rotation(torch.tensor(positions)))
    assert torch.equal(out[:, 2], x[:, 2])
    # Upstream's formula, written out: frequencies on the fly, (xr cos - xi sin, xr sin + xi cos).
    freqs = torch.exp(torch.arange(D // 2, dtype=torch.float32) * (-math.log(10000.0) * 2 / D))
    angle = torch.tensor(positions).float()[:, None, None, None] * freqs
    xr, xi = x[:, :2, :, 0::2], x[:, :2, :, 1::2]
    expected = torch.stack([xr * torch.cos(angle) - xi * torch.sin(angle),
                            xr * torch.sin(angle) + xi * torch.cos(angle)], dim=-1).flatten(-2)
    torch.testing.assert_close(out[:, :2], expected, rtol=0, atol=1e-6)


def test_the_rope_table_stays_fp32_and_is_rebuilt_by_casts_and_to_empty():
    fresh = blocks.Rotary(8, 10000.0).freqs.clone()
    with torch.device("meta"):
        rotary = blocks.Rotary(8, 10000.0).to(torch.bfloat16)
    assert rotary.freqs.is_meta and rotary.freqs.dtype == torch.float32
    rotary.to_empty(device="cpu")
    assert torch.equal(rotary.freqs, fresh) and torch.equal(rotary.freqs[2], torch.zeros(1, 4))


def _separate_lookups(temp: temporal.Temporal, columns: torch.Tensor) -> torch.Tensor:
    """What `embed` computes, table by table, audio streams summed in order, then text."""
    audio = temp.emb[0](columns[:, 1])
    for q in range(1, temp.cfg.n_q):
        audio = audio + temp.emb[q](columns[:, 1 + q])
    return audio + temp.text_emb(columns[:, 0])


def test_the_embedding_tables_stay_one_table_through_loading_and_casts():
    cfg = config.tiny()
    lm = checkpoint.random_lm(cfg, seed=3)
    columns = torch.cat([torch.randint(0, cfg.text_card + 1, (6, 1)), torch.randint(0, cfg.card + 1, (6, cfg.n_q))], 1)
    for temp in (lm.temporal, lm.temporal.to(torch.float64).to(torch.float32)):
        assert all(e.weight.untyped_storage().data_ptr() == temp._table.untyped_storage().data_ptr()
                   for e in (temp.text_emb, *temp.emb))
        assert torch.equal(temp.embed(columns), _separate_lookups(temp, columns))
    state = checkpoint.lm_state(lm)  # a file's tensors: one storage each
    assert len({t.untyped_storage().data_ptr() for t in state.values()}) == len(state)
    with torch.device("meta"):
        loaded = temporal.Temporal(cfg)
    loaded.to_empty(device="cpu")
    with torch.no_grad():
        for key, tensor in loaded.state_dict().items():  # as `checkpoint.load_lm` does
            tensor.copy_(state[key])
    assert torch.equal(loaded.embed(columns), lm.temporal.embed(columns))
