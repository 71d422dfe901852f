"""SiLU-and-gate in one kernel (`kernels.gate`): the Triton kernel, run by Triton's interpreter on
CPU tensors (`TRITON_INTERPRET=1`, tests/conftest.py), against the eager composition it replaces.

Tolerances: in fp32 both compute `silu(g) * l` in fp32, each `exp` and division within an ulp or
so: 1e-6 relative (about 16 ulps). In bf16 the kernel rounds its fp32 value once; the interpreter
truncates there (its fp32 -> bf16 cast, < 2^-7 relative) where the GPU rounds to nearest (LLVM's
`fptrunc`, < 2^-8), and the eager composition rounds twice (SiLU, then the product, each < 2^-8):
at most 2^-6 between them, with second-order terms, 0.02. `scripts/gpu_check.py` measures the
CUDA kernel against the eager ops.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("triton", reason="the fused kernels need Triton (the dev extra installs it)")

from liveplex.personaplex.kernels import gate  # noqa: E402  (after the skip: gate.launch needs Triton)

TOLERANCE = {torch.float32: {"rtol": 1e-6, "atol": 1e-7}, torch.bfloat16: {"rtol": 0.02, "atol": 0.0}}
ONE_ROUNDING_BF16 = {"rtol": 2 ** -7, "atol": 0.0}
"""One truncation of the fp32 value (the interpreter's cast; the GPU's rounding is within half that)."""


def _fused(y: torch.Tensor) -> torch.Tensor:
    out = torch.empty((*y.shape[:-1], y.shape[-1] // 2), dtype=y.dtype)
    gate.launch(y, out)
    return out


def _y(rows: int, hidden: int, dtype: torch.dtype, seed: int, scale: float = 3.0) -> torch.Tensor:
    return (torch.randn(rows, 2 * hidden, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 5), hidden=st.integers(1, 2100), dtype=st.sampled_from([torch.float32, torch.bfloat16]),
       seed=st.integers(0, 2 ** 16), scale=st.sampled_from([1e-3, 1.0, 8.0]))
def test_the_kernel_is_the_eager_composition_at_any_width(rows, hidden, dtype, seed, scale):
    y = _y(rows, hidden, dtype, seed, scale)
    torch.testing.assert_close(_fused(y), gate.reference(y), **TOLERANCE[dtype])


@pytest.mark.parametrize("hidden", [2816, 11264], ids=["depformer", "temporal"])
def test_at_the_real_widths_bf16_rounds_once_from_fp32(hidden):
    y = _y(3, hidden, torch.bfloat16, seed=hidden)
    out = _fused(y)
    torch.testing.assert_close(out, gate.reference(y), **TOLERANCE[torch.bfloat16])
    torch.testing.assert_close(out.float(), gate.reference(y.float()), **ONE_ROUNDING_BF16)


def test_strided_rows_and_leading_dimensions_are_read_where_they_are():
    wide = _y(6, 40, torch.float32, seed=1)
    y = wide[:, :50]  # rows 80 floats apart, 25 hidden columns
    torch.testing.assert_close(_fused(y), gate.reference(y), **TOLERANCE[torch.float32])
    batched = _y(6, 25, torch.float32, seed=2).view(2, 3, 50)
    torch.testing.assert_close(_fused(batched), gate.reference(batched), **TOLERANCE[torch.float32])


def test_the_op_is_the_reference_on_the_cpu_and_shapes_only_on_meta():
    y = _y(4, 33, torch.bfloat16, seed=3)
    assert torch.equal(gate.silu_and_mul(y), gate.reference(y))
    assert torch.equal(gate.gated(y), gate.reference(y))  # the CPU runs the eager ops, not the op
    meta = gate.gated(torch.empty(5, 2, 66, device="meta", dtype=torch.bfloat16))
    assert meta.shape == (5, 2, 33) and meta.dtype == torch.bfloat16
    torch.library.opcheck(gate.silu_and_mul, (y,))
