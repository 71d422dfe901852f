"""The race noise of every token id of every draw of a tick in one kernel (issue 14).

`liveplex::race_noise` is `sampling.lane_noise` (D8's counter hash, spec personaplex §5.9), which
eager aten runs as about forty kernels over a [B, sum(cards)] table, computed in one Triton
kernel: the same int64 mix with the same constants (`sampling.M1`, ...), exact, then the same
fp32 `(bits + 0.5) * 2^-24` (exact) and `log(-log U)`: only the two logs may round differently
from the eager kernels' (`scripts/gpu_check.py` reports the largest difference on CUDA), which
changes a draw only where two candidates' scores tie to within that. The op's CPU implementation is
`sampling.lane_noise`; its fake one gives the shape (the meta device). `lane_noise` is what the
served draws call: the op where `fusion.fused`, the eager composition elsewhere.
"""

from __future__ import annotations

import torch

from liveplex.personaplex import sampling
from liveplex.personaplex.kernels import fusion

BLOCK = 1024
"""Lanes per program: the real tick's 48,384 lanes (32,000 text ids, 8 x 2048 audio) are 48 per row."""


def lane_noise(key: torch.Tensor, column: torch.Tensor, lanes: sampling.Lanes) -> torch.Tensor:
    """The noise of every lane for rows with `key`, `column` [B]: [B, sum(cards)] fp32, one kernel
    where fused."""
    if fusion.fused(key.device):
        return race_noise(key, column, lanes.stream, lanes.ids)
    return sampling.lane_noise(key, column, lanes.stream, lanes.ids)


@torch.library.custom_op("liveplex::race_noise", mutates_args=(), device_types="cpu")
def race_noise(key: torch.Tensor, column: torch.Tensor, stream: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """key, column [B] int64, stream, ids [L] int64 -> [B, L] fp32; on the CPU, `sampling.lane_noise`."""
    return sampling.lane_noise(key, column, stream, ids)


@race_noise.register_fake
def _shape(key: torch.Tensor, column: torch.Tensor, stream: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return key.new_empty((key.shape[0], stream.shape[0]), dtype=torch.float32)


if fusion.TRITON:  # the kernels: where Triton imports (fusion.py)
    import triton
    import triton.language as tl

    _MASK32 = tl.constexpr(sampling.MASK32)
    _M1 = tl.constexpr(sampling.M1)
    _M2 = tl.constexpr(sampling.M2)
    _SALT_COLUMN = tl.constexpr(sampling.SALT_COLUMN)
    _SALT_STREAM = tl.constexpr(sampling.SALT_STREAM)
    _ULP = tl.constexpr(2.0 ** -24)

    @triton.jit
    def _mix(x):
        """`sampling._mix` on int64 values in [0, 2^32)."""
        x = x ^ (x >> 16)
        x = (x * _M1) & _MASK32
        x = x ^ (x >> 15)
        x = (x * _M2) & _MASK32
        return x ^ (x >> 16)

    @triton.jit
    def _kernel(key_ptr, column_ptr, stream_ptr, ids_ptr, out_ptr, lanes, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        keep = cols < lanes
        h = _mix(tl.load(key_ptr + row) ^ (tl.load(column_ptr + row) & _MASK32) ^ _SALT_COLUMN)
        h = _mix(h ^ (tl.load(stream_ptr + cols, mask=keep, other=0) ^ _SALT_STREAM))
        bits = _mix(h ^ tl.load(ids_ptr + cols, mask=keep, other=0)) >> 8
        u = (bits.to(tl.float32) + 0.5) * _ULP
        tl.store(out_ptr + row * lanes + cols, tl.log(-tl.log(u)), mask=keep)

    def launch(key: torch.Tensor, column: torch.Tensor, stream: torch.Tensor, ids: torch.Tensor,
               out: torch.Tensor) -> None:
        """One launch writes `out` [B, L] (contiguous); inputs contiguous int64. Wherever Triton
        runs: CUDA, or the CPU under `TRITON_INTERPRET=1` (the tests)."""
        rows, lanes = out.shape
        assert key.shape == column.shape == (rows,) and stream.shape == ids.shape == (lanes,), "[B], [B], [L], [L]"
        assert out.is_contiguous() and out.dtype == torch.float32
        assert all(t.dtype == torch.long and t.is_contiguous() for t in (key, column, stream, ids)), "int64"
        _kernel[(rows, triton.cdiv(lanes, BLOCK))](key, column, stream, ids, out, lanes,
                                                   BLOCK=BLOCK)  # type: ignore[arg-type]  # triton: a tl.constexpr parameter takes its plain value at launch

    @race_noise.register_kernel("cuda")
    def _cuda(key: torch.Tensor, column: torch.Tensor, stream: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        out = key.new_empty((key.shape[0], stream.shape[0]), dtype=torch.float32)
        launch(key, column, stream, ids, out)
        return out
