"""The 8-bit KV ring (issue 36): its scales, what it stores, its row operations and both backends over it."""

from __future__ import annotations

import math

import torch

from liveplex.personaplex import blocks, checkpoint, config, kv8, ring, temporal


def _tiny() -> temporal.Temporal:
    return checkpoint.random_lm(config.tiny(), seed=3).temporal


@torch.no_grad()
def test_the_worst_input_fills_the_top_binade_and_never_saturates():
    """For each layer's largest-bound V row, the input that maximises it (x along the row, times
    alpha) lands in (224, 448]: the scale wastes at most one binade and nothing can pass 448."""
    temp = _tiny()
    scale = temp.kv_scales()
    dim, heads, D = temp.cfg.dim, temp.cfg.num_heads, temp.cfg.head_dim
    assert torch.equal(scale, torch.exp2(torch.log2(scale).round()))  # powers of two
    for i, layer in enumerate(temp.transformer.layers):
        rows = layer.self_attn.in_proj_weight[2 * dim:] * layer.norm1.alpha.reshape(1, dim)
        for h in range(heads):
            j = h * D + int(rows[h * D:(h + 1) * D].norm(dim=1).argmax())
            x = (rows[j] / rows[j].norm() * math.sqrt(dim))[None]  # rms 1: norm1 leaves it alpha * x
            v = blocks.linear_fp32(layer.norm1(x), layer.self_attn.in_proj_weight)[0, 2 * dim + j]
            assert kv8.E4M3_MAX / 2 < float(v.abs() / scale[i, 1, h, 0]) <= kv8.E4M3_MAX * (1 + 1e-5)


@torch.no_grad()
def test_the_ring_holds_the_full_precision_keys_and_values_divided_by_their_scale_and_rounded():
    temp = _tiny()
    full, eight = temp.new_pool(2), temp.new_pool(2, kv8.FP8)
    assert eight.kv.dtype == kv8.FP8 and eight.nbytes_per_slot * 4 == full.nbytes_per_slot  # fp32 -> 1 byte
    assert torch.equal(eight.scale, temp.kv_scales())
    assert torch.equal(eight.inverse * eight.scale, torch.ones_like(eight.scale))
    x, position = torch.randn(2, temp.cfg.dim), torch.tensor([0, 7])
    temp.step(x, position, full)
    temp.step(x, position, eight)
    layer0 = eight.inverse[0]  # layer 0's input is the same embedding in both: its K and V are
    stored = eight.kv[[0, 1], 0, [0, 7]]
    assert torch.equal(stored.view(torch.uint8), kv8.quantize(full.kv[[0, 1], 0, [0, 7]], layer0).view(torch.uint8))


def test_row_operations_move_bits_and_keep_the_scales():
    temp = _tiny()
    pool = temp.new_pool(3, kv8.FP8)
    pool.kv.view(torch.uint8).copy_(torch.randint(0, 120, pool.kv.shape, dtype=torch.uint8))
    before = pool.clone()
    assert before.scale is pool.scale and before.kv.data_ptr() != pool.kv.data_ptr()
    pool.copy_rows([2], pool, [0])
    assert torch.equal(pool.kv[2].view(torch.uint8), before.kv[0].view(torch.uint8))
    pool.reset([1])
    pool.reset(slice(0, 1))
    assert not pool.kv[:2].view(torch.uint8).any()
    head = pool.head(2)
    assert head.scale is pool.scale and head.batch == 2 and pool.tensors() == [pool.kv]


@torch.no_grad()
def test_masked_and_flash_read_the_same_ring_live_and_in_a_prefill_across_the_wrap():
    temp = _tiny()
    C = temp.cfg.context
    gen = torch.Generator().manual_seed(5)
    pools = {b: temp.new_pool(2, kv8.FP8) for b in ring.Backend}
    x = torch.randn(30, temp.cfg.dim, generator=gen)
    segments = [temporal.Segment(0, 0, 10), temporal.Segment(1, 0, 20)]
    outs = {b: temp.forward_rows(x, segments, p, b) for b, p in pools.items()}
    torch.testing.assert_close(outs[ring.Backend.FLASH], outs[ring.Backend.MASKED], rtol=1e-5, atol=1e-5)
    for t in range(C + 15):  # both rows wrap the ring
        x = torch.randn(2, temp.cfg.dim, generator=gen)
        position = torch.tensor([10 + t, 20 + t])
        for b, p in pools.items():
            outs[b] = temp.step(x, position, p, ring.live_plan(position, p, ring.Offsets.of(p), b, C))
        torch.testing.assert_close(outs[ring.Backend.FLASH], outs[ring.Backend.MASKED], rtol=1e-5, atol=1e-5)
    masked, flash = (pools[b].kv.view(torch.uint8) for b in ring.Backend)
    assert torch.equal(masked, flash)
