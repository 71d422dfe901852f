"""The 8-bit ring's write and varlen attention kernels (`kernels.kv8`): the Triton kernels, run by
Triton's interpreter on CPU tensors (`TRITON_INTERPRET=1`, tests/conftest.py), against the eager
compositions they replace.

The write is exact: the kernel multiplies by a power of two in fp32 and rounds to nearest even, as
torch's cast does (written out, `_round_e4m3`: the interpreter's own conversion drops some carries),
so the stored bytes are the reference's, subnormals and saturated values included. The attention reads the same e4m3
values; only fp32 summation order differs (an online softmax over 64-key tiles against one
softmax), over logits up to a few hundred here (keys of up to 448 times their scale): 1e-4
relative, and 1e-6 of the largest value averaged (a softmax-weighted average of values of mixed
sign can cancel to far less than its terms, whose rounding it keeps: Hypothesis found one output
of 0.53 off by 1.8e-4 among values of up to ~900). `scripts/gpu_check.py` measures the CUDA kernels.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")

from liveplex.personaplex import kv8  # noqa: E402
from liveplex.personaplex.kernels import kv8 as kernels  # noqa: E402  (after the skip: launch needs Triton)

FP32 = {"rtol": 1e-4, "atol": 1e-5}


def _ring(T: int, H: int, D: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(T, 2, H, D, generator=gen) * 40).to(kv8.FP8)


def _scale(H: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.exp2(torch.randint(-8, 2, (2, H, 1), generator=gen).float())


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 6), heads=st.integers(1, 4), head_dim=st.sampled_from([4, 8, 24]),
       dtype=st.sampled_from([torch.float32, torch.bfloat16]), seed=st.integers(0, 2 ** 16))
def test_the_write_stores_the_references_bytes_at_each_rows_index(rows, heads, head_dim, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    wide = (torch.randn(rows, 3, heads, head_dim, generator=gen) * 300).to(dtype)  # some saturate
    wide[0, 1, 0, :3] = torch.tensor([2.0 ** -7, 2.0 ** -10, 2.0 ** -9 * 1.5])  # subnormal: a step, ties to even
    kv = wide[:, 1:]  # rows strided, as the QKV tensor's K and V
    inverse = 1.0 / _scale(heads, seed)
    index = torch.randperm(3 * rows, generator=gen)[:rows]
    fused, eager = _ring(3 * rows, heads, head_dim, seed), _ring(3 * rows, heads, head_dim, seed)
    kernels.launch_write(fused, index, kv, inverse)
    kernels.write_reference(eager, index, kv, inverse)
    assert torch.equal(fused.view(torch.uint8), eager.view(torch.uint8))
    assert fused.float().abs().max() <= kv8.E4M3_MAX


def _groups(lengths: list[tuple[int, int]], T: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """cu_q, cu_k, used of groups (queries, keys) laid out one after the other in a ring of T keys."""
    cu_q, cu_k, used, at = [0], [], [], 0
    for queries, keys in lengths:
        cu_q.append(cu_q[-1] + queries)
        cu_k.append(at)
        used.append(keys)
        at += keys + 3  # a gap: stale keys no group may read
    cu_k.append(T)
    return (torch.tensor(cu_q, dtype=torch.int32), torch.tensor(cu_k, dtype=torch.int32),
            torch.tensor(used, dtype=torch.int32))


@settings(max_examples=8, deadline=None)
@given(groups=st.lists(st.tuples(st.integers(1, 4), st.integers(4, 140)), min_size=1, max_size=3),
       heads=st.integers(1, 3), head_dim=st.sampled_from([8, 24]), causal=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_the_attention_is_the_references_for_young_long_and_causal_groups(groups, heads, head_dim, causal, seed):
    """Groups of one query (a live tick) and of several (a prefill, causal), keys over several
    tiles or less than one; the gaps between groups hold keys nobody may read."""
    T = sum(k + 3 for _, k in groups)
    packed = _ring(T, heads, head_dim, seed)
    cu_q, cu_k, used = _groups(groups, T)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(int(cu_q[-1]), 3, heads, head_dim, generator=gen)[:, 0]  # strided rows, as the QKV's q
    scale = _scale(heads, seed + 1)
    max_q, max_k = max(g[0] for g in groups), max(g[1] for g in groups)
    out = torch.empty(q.shape)
    kernels.launch_attend(q, packed, scale, cu_q, cu_k, used, max_q, causal, out)
    reach = (packed[:, 1].float() * scale[1]).abs().max().item()  # the largest value a row averages
    torch.testing.assert_close(out, kernels.attend_reference(q, packed, scale, cu_q, cu_k, used, max_k, causal),
                               rtol=FP32["rtol"], atol=1e-6 * reach)


def test_the_reference_is_attention_over_each_rows_dequantized_keys():
    """The eager composition itself, against attention written out in float64 row by row."""
    H, D = 2, 8
    groups = [(1, 5), (3, 70)]
    T = sum(k + 3 for _, k in groups)
    packed, scale = _ring(T, H, D, 7), _scale(H, 7)
    cu_q, cu_k, used = _groups(groups, T)
    q = torch.randn(4, H, D, generator=torch.Generator().manual_seed(7))
    got = kernels.attend_reference(q, packed, scale, cu_q, cu_k, used, 70, True)
    for row, (group, first) in enumerate([(0, 0), (1, 1), (1, 1), (1, 1)]):
        queries, keys = groups[group]
        n = keys - (queries - 1 - (row - first))
        kv = packed[int(cu_k[group]):int(cu_k[group]) + n].double() * scale.double()
        weights = torch.softmax(torch.einsum("hd,shd->hs", q[row].double(), kv[:, 0]) / D ** 0.5, -1)
        torch.testing.assert_close(got[row].double(), torch.einsum("hs,shd->hd", weights, kv[:, 1]), **FP32)


def test_the_ops_are_the_references_on_the_cpu_and_shapes_only_on_meta():
    H, D = 2, 8
    packed, scale = _ring(20, H, D, 1), _scale(H, 1)
    cu_q, cu_k, used = _groups([(1, 9), (1, 4)], 20)
    q = torch.randn(2, H, D)
    expected = kernels.attend_reference(q, packed, scale, cu_q, cu_k, used, 9, False)
    assert torch.equal(kernels.kv8_attend(q, packed, scale, cu_q, cu_k, used, 1, 9, False), expected)
    assert torch.equal(kernels.attend(q, packed, scale, cu_q, cu_k, used, 1, 9, False), expected)
    meta = kernels.attend(q.to("meta"), packed.to("meta"), scale.to("meta"), cu_q.to("meta"), cu_k.to("meta"),
                          used.to("meta"), 1, 9, False)
    assert meta.shape == q.shape and meta.device.type == "meta"
    kv, index = torch.randn(2, 2, H, D), torch.tensor([3, 11])
    op, eager = packed.clone(), packed.clone()
    kernels.kv8_write(op, index, kv, 1.0 / scale)
    kernels.write_reference(eager, index, kv, 1.0 / scale)
    assert torch.equal(op.view(torch.uint8), eager.view(torch.uint8))
