"""SiLU-and-gate in one kernel: `silu(y[..., :h]) * y[..., h:]`, the gated FFN's hidden (issue 14).

`liveplex::silu_and_mul` replaces the two kernels of the eager composition (`reference`: the SiLU,
rounded to y's dtype, then the product, as upstream moshi computes it) by one Triton kernel that
reads both halves once and computes in fp32, rounding once to y's dtype: in bf16 within 2^-8
(relative) of the fp32 value, where the reference rounds twice, so within three roundings
(3 * 2^-8) of it. The op's CPU implementation is the reference; its fake one gives the shape (the
meta device). `gated` is what the FFNs call: the op where `fusion.fused`, the reference elsewhere.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from liveplex.personaplex.kernels import fusion

BLOCK = 1024
"""Hidden columns per program: the real widths (11264, 2816) are 11 and 3 programs per row."""


def reference(y: torch.Tensor) -> torch.Tensor:
    """The eager composition, two kernels: [..., 2h] -> [..., h] in y's dtype."""
    halves = y.view(*y.shape[:-1], 2, -1)
    return F.silu(halves[..., 0, :]) * halves[..., 1, :]


def gated(y: torch.Tensor) -> torch.Tensor:
    """`silu(gate) * linear` of y [..., 2h] = [gate; linear] -> [..., h]: one kernel where fused."""
    return silu_and_mul(y) if fusion.fused(y.device) else reference(y)


@torch.library.custom_op("liveplex::silu_and_mul", mutates_args=(), device_types="cpu")
def silu_and_mul(y: torch.Tensor) -> torch.Tensor:
    """[..., 2h] -> [..., h]; on the CPU, `reference`."""
    return reference(y)


@silu_and_mul.register_fake
def _shape(y: torch.Tensor) -> torch.Tensor:
    return y.new_empty((*y.shape[:-1], y.shape[-1] // 2))


if fusion.TRITON:  # the kernels: where Triton imports (fusion.py)
    import triton
    import triton.language as tl

    @triton.jit
    def _kernel(y_ptr, out_ptr, hidden, y_row, out_row, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        keep = cols < hidden
        gate = tl.load(y_ptr + row * y_row + cols, mask=keep).to(tl.float32)
        linear = tl.load(y_ptr + row * y_row + hidden + cols, mask=keep).to(tl.float32)
        out = gate * tl.sigmoid(gate) * linear
        tl.store(out_ptr + row * out_row + cols, out.to(out_ptr.dtype.element_ty), mask=keep)

    def launch(y: torch.Tensor, out: torch.Tensor) -> None:
        """One launch writes `out` [..., h] from y [..., 2h] (rows may be strided, columns not;
        `view` raises rather than copy). Wherever Triton runs: CUDA, or the CPU under
        `TRITON_INTERPRET=1` (the tests)."""
        hidden = out.shape[-1]
        assert y.shape[-1] == 2 * hidden and y.dtype == out.dtype, "y is [..., 2h], out [..., h], one dtype"
        rows, outs = y.view(-1, 2 * hidden), out.view(-1, hidden)
        assert rows.stride(1) == outs.stride(1) == 1, "columns must be contiguous"
        _kernel[(rows.shape[0], triton.cdiv(hidden, BLOCK))](rows, outs, hidden, rows.stride(0), outs.stride(0),
                                                              BLOCK=BLOCK)  # type: ignore[arg-type]  # triton: a tl.constexpr parameter takes its plain value at launch

    @silu_and_mul.register_kernel("cuda")
    def _cuda(y: torch.Tensor) -> torch.Tensor:
        out = y.new_empty((*y.shape[:-1], y.shape[-1] // 2))
        launch(y, out)
        return out
