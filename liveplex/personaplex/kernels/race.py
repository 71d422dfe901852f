"""The race among a draw's top-k candidates in one kernel: their noise, scores and winner (issue 14).

`liveplex::race_winner` is `sampling.winner` of the candidates' noise gathered from the draw's
noise for every id (`sampling.Lanes.split` of `noise.lane_noise`): eager aten runs the gather, the
temperature-and-noise add, the argmax and the winner's gather as four kernels; the Triton kernel
runs them as one, a program per row over its k <= 256 candidates. The scores are one fused
multiply-add per candidate, as CUDA's `add` with `alpha` computes them, ties go to the first
candidate (the largest logit) as `argmax`'s, so the winner is the eager one's. The top-k itself
stays `torch.topk` (`sampling.candidates`): a selection over 32,000 or 2,048 logits per row whose
fused form is only worth having once it is measured on a GPU. The op's CPU implementation is the
eager composition; its fake one gives the shape (the meta device). `race_draw` is what the served
draws call: the op where `fusion.fused`, the eager composition elsewhere.
"""

from __future__ import annotations

import torch

from liveplex.personaplex import sampling
from liveplex.personaplex.kernels import fusion


def reference(values: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, temperature: float) -> torch.Tensor:
    """The eager composition, four kernels: candidates' values, ids [B, k], every id's noise [B, V]
    -> [B] int64."""
    return sampling.winner(values, ids, noise.gather(-1, ids), temperature)


def race_draw(logits: torch.Tensor, noise: torch.Tensor, top_k: int, temperature: float) -> torch.Tensor:
    """A sampled draw (`sampling.draw`) of [B, V] logits with `noise` [B, V] for every id -> [B]
    int64: `torch.topk`, then the race in one kernel where fused."""
    top = sampling.candidates(logits, top_k)
    if fusion.fused(logits.device):
        return race_winner(top.values, top.indices, noise, temperature)
    return reference(top.values, top.indices, noise, temperature)


@torch.library.custom_op("liveplex::race_winner", mutates_args=(), device_types="cpu")
def race_winner(values: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, temperature: float) -> torch.Tensor:
    """values fp32, ids int64 [B, k], noise fp32 [B, V] -> [B] int64; on the CPU, `reference`."""
    return reference(values, ids, noise, temperature)


@race_winner.register_fake
def _shape(values: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, temperature: float) -> torch.Tensor:
    return ids.new_empty(ids.shape[0])


if fusion.TRITON:  # the kernels: where Triton imports (fusion.py)
    import triton
    import triton.language as tl

    @triton.jit
    def _kernel(values_ptr, ids_ptr, noise_ptr, out_ptr, k, noise_row, temperature, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        at = tl.arange(0, BLOCK)
        keep = at < k
        ids = tl.load(ids_ptr + row * k + at, mask=keep, other=0)
        values = tl.load(values_ptr + row * k + at, mask=keep, other=0.0)
        noise = tl.load(noise_ptr + row * noise_row + ids, mask=keep, other=0.0)
        scores = tl.where(keep, tl.fma(noise, -temperature, values), float("-inf"))
        first = tl.argmax(scores, axis=0, tie_break_left=True)
        tl.store(out_ptr + row, tl.sum(tl.where(at == first, ids, 0), axis=0))

    def launch(values: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, temperature: float,
               out: torch.Tensor) -> None:
        """One launch writes `out` [B] int64: values, ids contiguous [B, k]; noise [B, V], its
        columns contiguous. Wherever Triton runs: CUDA, or the CPU under `TRITON_INTERPRET=1`."""
        rows, k = ids.shape
        assert values.shape == ids.shape and values.is_contiguous() and ids.is_contiguous(), "[B, k] contiguous"
        assert values.dtype == noise.dtype == torch.float32 and ids.dtype == out.dtype == torch.long
        assert noise.shape[0] == rows and noise.stride(1) == 1 and out.shape == (rows,)
        _kernel[(rows,)](values, ids, noise, out, k, noise.stride(0), temperature, BLOCK=triton.next_power_of_2(k))

    @race_winner.register_kernel("cuda")
    def _cuda(values: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, temperature: float) -> torch.Tensor:
        out = ids.new_empty(ids.shape[0])
        launch(values, ids, noise, temperature, out)
        return out
