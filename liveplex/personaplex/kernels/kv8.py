"""The 8-bit ring's write and its varlen attention, one kernel each (issue 36).

`liveplex::kv8_write` quantizes a forward's K and V rows with the layer's scales (`kv8.quantize`)
and stores them at their ring indices: where eager aten runs a multiply, a cast and the index copy,
one kernel. `liveplex::kv8_attend` is the `flash` backend's attention over an e4m3 ring: the varlen
contract of `aten._flash_attention_forward` (groups of queries `cu_q`, each reading `used` keys
from `cu_k` of the packed ring, causal with the last query on the last key), reading the fp8 keys
and values directly, each tile converted in registers, with K's scale folded into q and V's into
the output: it reads half the bytes flash reads from a bf16 ring, and the tick keeps its kernel
count. A program is one query row and one head, looping over key tiles with an online softmax (a
live tick has one query per session; a split over keys is the next step if a GPU finds long rows
slow).

Each op's CPU implementation is the eager composition (the reference the kernels are tested
against under `TRITON_INTERPRET=1`); its fake one gives the shape (the meta device, where
`liveplex.bench.counts` counts it as one kernel). `write` and `attend` are what the ring calls:
the op where `fusion.fused`, the eager composition elsewhere.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from liveplex.personaplex import kv8
from liveplex.personaplex.kernels import fusion

BLOCK_N = 64
"""Keys per tile of `kv8_attend`."""


def write_reference(packed: torch.Tensor, index: torch.Tensor, kv: torch.Tensor, inverse: torch.Tensor) -> None:
    """The eager composition: quantize kv `[N, 2, H, D]` with `inverse` `[2, H, 1]` and store row n
    at `packed[index[n]]` (`packed`: `[T, 2, H, D]` e4m3; copied as bits: the CPU has no e4m3
    `index_copy`)."""
    packed.view(torch.uint8).index_copy_(0, index, kv8.quantize(kv, inverse).view(torch.uint8))


def attend_reference(q: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, cu_q: torch.Tensor,
                     cu_k: torch.Tensor, used: torch.Tensor, max_k: int, causal: bool) -> torch.Tensor:
    """The varlen contract without a host sync: every row gathers `max_k` keys from its group's
    start and masks those past its own count. q `[N, H, D]`; packed `[T, 2, H, D]` e4m3; scale
    `[2, H, 1]`; cu_q, cu_k `[G + 1]`, used `[G]` int32 -> `[N, H, D]` in q's dtype."""
    rows = torch.arange(q.shape[0], device=q.device)
    group = torch.searchsorted(cu_q[1:].long(), rows, right=True)
    first, queries = cu_q.long()[group], (cu_q[1:] - cu_q[:-1]).long()[group]
    keys = used.long()[group] - ((queries - 1 - (rows - first)) if causal else 0)
    at = torch.arange(max_k, device=q.device)
    kv = packed[(cu_k.long()[group][:, None] + at).clamp(max=packed.shape[0] - 1)].to(q.dtype)  # [N, K, 2, H, D]
    k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
    mask = (at < keys[:, None])[:, None, None, :]
    return F.scaled_dot_product_attention((q * scale[0])[:, :, None], k, v, attn_mask=mask)[:, :, 0] * scale[1]


def write(packed: torch.Tensor, index: torch.Tensor, kv: torch.Tensor, inverse: torch.Tensor) -> None:
    """Store quantized K and V rows in the ring: one kernel where fused."""
    if fusion.fused(kv.device):
        kv8_write(packed, index, kv, inverse)
    else:
        write_reference(packed, index, kv, inverse)


def attend(q: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor,
           used: torch.Tensor, max_q: int, max_k: int, causal: bool) -> torch.Tensor:
    """Varlen attention over the e4m3 ring: one kernel where fused."""
    if fusion.fused(q.device):
        return kv8_attend(q, packed, scale, cu_q, cu_k, used, max_q, max_k, causal)
    return attend_reference(q, packed, scale, cu_q, cu_k, used, max_k, causal)


@torch.library.custom_op("liveplex::kv8_write", mutates_args=("packed",), device_types="cpu")
def kv8_write(packed: torch.Tensor, index: torch.Tensor, kv: torch.Tensor, inverse: torch.Tensor) -> None:
    """packed `[T, 2, H, D]` e4m3, index `[N]` int64, kv `[N, 2, H, D]`, inverse `[2, H, 1]` fp32;
    on the CPU, `write_reference`."""
    write_reference(packed, index, kv, inverse)


@kv8_write.register_fake
def _write_shape(packed: torch.Tensor, index: torch.Tensor, kv: torch.Tensor, inverse: torch.Tensor) -> None:
    return None


@torch.library.custom_op("liveplex::kv8_attend", mutates_args=(), device_types="cpu")
def kv8_attend(q: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor,
               used: torch.Tensor, max_q: int, max_k: int, causal: bool) -> torch.Tensor:
    """`[N, H, D]` in q's dtype; on the CPU, `attend_reference`."""
    return attend_reference(q, packed, scale, cu_q, cu_k, used, max_k, causal)


@kv8_attend.register_fake
def _attend_shape(q: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, cu_q: torch.Tensor,
                  cu_k: torch.Tensor, used: torch.Tensor, max_q: int, max_k: int, causal: bool) -> torch.Tensor:
    return torch.empty_like(q, memory_format=torch.contiguous_format)


if fusion.TRITON:  # the kernels: where Triton imports (fusion.py)
    import triton
    import triton.language as tl

    _E4M3_MAX = tl.constexpr(kv8.E4M3_MAX)
    _MIN_NORMAL = tl.constexpr(2.0 ** -6)
    _SUBNORMAL_ROUNDER = tl.constexpr(1.5 * 2.0 ** 14)
    """An fp32 sum with it rounds to multiples of 2^-9 (its ulp): e4m3's subnormal step."""

    @triton.jit
    def _round_e4m3(y):
        """fp32 y, |y| <= 448, rounded to the nearest e4m3 value (ties to even), still fp32: the
        cast after it is exact. Written out rather than left to the cast, whose rounding under
        Triton's interpreter drops the carry into the exponent (4.5 -> 4, not 5, at some values)."""
        bits = y.to(tl.int32, bitcast=True)
        lsb = (bits >> 20) & 1
        normal = ((bits + 0x7FFFF + lsb) & -0x100000).to(tl.float32, bitcast=True)  # 3 mantissa bits kept
        subnormal = (y + _SUBNORMAL_ROUNDER) - _SUBNORMAL_ROUNDER
        return tl.where(tl.abs(y) < _MIN_NORMAL, subnormal, normal)

    @triton.jit
    def _write_kernel(kv_ptr, inverse_ptr, index_ptr, packed_ptr, width, head_dim, kv_row, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        keep = cols < width
        x = tl.load(kv_ptr + row * kv_row + cols, mask=keep, other=0.0).to(tl.float32)
        inverse = tl.load(inverse_ptr + cols // head_dim, mask=keep, other=0.0)
        y = _round_e4m3(tl.clamp(x * inverse, -_E4M3_MAX, _E4M3_MAX))
        dst = tl.load(index_ptr + row)
        tl.store(packed_ptr + dst * width + cols, y.to(tl.float8e4nv, fp_downcast_rounding="rtne"), mask=keep)

    def launch_write(packed: torch.Tensor, index: torch.Tensor, kv: torch.Tensor, inverse: torch.Tensor) -> None:
        """One launch stores kv's rows (rows may be strided; a row's K and V contiguous) at `index`
        of `packed` (contiguous). Wherever Triton runs: CUDA, or the CPU under `TRITON_INTERPRET=1`."""
        N, _, H, D = kv.shape
        width = 2 * H * D
        assert packed.is_contiguous() and packed.dtype == kv8.FP8 and packed.shape[1:] == kv.shape[1:]
        assert kv[0].is_contiguous() and inverse.is_contiguous() and inverse.dtype == torch.float32
        assert index.shape == (N,) and index.dtype == torch.long
        block = min(4096, triton.next_power_of_2(width))
        _write_kernel[(N, triton.cdiv(width, block))](kv, inverse, index, packed, width, D, kv.stride(0), BLOCK=block)

    @kv8_write.register_kernel("cuda")
    def _write_cuda(packed: torch.Tensor, index: torch.Tensor, kv: torch.Tensor, inverse: torch.Tensor) -> None:
        launch_write(packed, index, kv, inverse)

    @triton.jit
    def _attend_kernel(q_ptr, kv_ptr, scale_ptr, cu_q_ptr, cu_k_ptr, used_ptr, out_ptr, heads, head_dim, q_row,
                       sm_scale, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
        g = tl.program_id(0)
        i = tl.program_id(1)
        h = tl.program_id(2)
        q0 = tl.load(cu_q_ptr + g)
        queries = tl.load(cu_q_ptr + g + 1) - q0
        if i < queries:
            row = (q0 + i).to(tl.int64)
            n = tl.load(used_ptr + g)
            if CAUSAL:
                n = n - (queries - 1 - i)
            start = tl.load(cu_k_ptr + g).to(tl.int64)
            hd = heads * head_dim
            d = tl.arange(0, BLOCK_D)
            dm = d < head_dim
            q = tl.load(q_ptr + row * q_row + h * head_dim + d, mask=dm, other=0.0).to(tl.float32)
            q = q * (tl.load(scale_ptr + h) * sm_scale)
            m = tl.max(tl.full([BLOCK_N], float("-inf"), tl.float32), axis=0)
            total = tl.sum(tl.zeros([BLOCK_N], tl.float32), axis=0)
            acc = tl.zeros([BLOCK_D], tl.float32)
            n0 = n * 0  # an int32 scalar from the start: a loop-carried value keeps one type
            while n0 < n:  # a loop to a loaded bound: `range` of it is not run by the interpreter
                keys = n0 + tl.arange(0, BLOCK_N)
                km = keys < n
                at = (start + keys)[:, None] * (2 * hd) + h * head_dim + d[None, :]
                both = km[:, None] & dm[None, :]
                k = tl.load(kv_ptr + at, mask=both, other=0.0).to(tl.float32)
                s = tl.where(km, tl.sum(k * q[None, :], axis=1), float("-inf"))
                m_new = tl.maximum(m, tl.max(s, axis=0))
                p = tl.exp(s - m_new)
                alpha = tl.exp(m - m_new)
                v = tl.load(kv_ptr + at + hd, mask=both, other=0.0).to(tl.float32)
                acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
                total = total * alpha + tl.sum(p, axis=0)
                m = m_new
                n0 += BLOCK_N
            out = acc / total * tl.load(scale_ptr + heads + h)
            tl.store(out_ptr + row * hd + h * head_dim + d, out.to(out_ptr.dtype.element_ty), mask=dm)

    def launch_attend(q: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, cu_q: torch.Tensor,
                      cu_k: torch.Tensor, used: torch.Tensor, max_q: int, causal: bool, out: torch.Tensor) -> None:
        """One launch writes `out` `[N, H, D]` (contiguous): q's rows may be strided, a row's heads
        contiguous; packed contiguous e4m3; scale `[2, H, 1]` contiguous fp32; offsets int32.
        Wherever Triton runs: CUDA, or the CPU under `TRITON_INTERPRET=1`."""
        N, H, D = q.shape
        assert packed.is_contiguous() and packed.dtype == kv8.FP8 and packed.shape[1:] == (2, H, D)
        assert q[0].is_contiguous() and out.is_contiguous() and out.shape == q.shape
        assert scale.is_contiguous() and scale.shape == (2, H, 1) and scale.dtype == torch.float32
        assert cu_q.dtype == cu_k.dtype == used.dtype == torch.int32
        grid = (cu_q.shape[0] - 1, max_q, H)
        _attend_kernel[grid](q, packed, scale, cu_q, cu_k, used, out, H, D, q.stride(0), D ** -0.5,
                             CAUSAL=causal, BLOCK_N=BLOCK_N, BLOCK_D=triton.next_power_of_2(D))  # type: ignore[arg-type]  # triton: a tl.constexpr parameter takes its plain value at launch

    @kv8_attend.register_kernel("cuda")
    def _attend_cuda(q: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, cu_q: torch.Tensor,
                     cu_k: torch.Tensor, used: torch.Tensor, max_q: int, max_k: int, causal: bool) -> torch.Tensor:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        launch_attend(q, packed, scale, cu_q, cu_k, used, max_q, causal, out)
        return out
