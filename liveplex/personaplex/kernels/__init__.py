"""Fused Triton kernels for the CUDA tick, each a `liveplex::` custom op (issue 14).

A tick's fixed cost on the GPU is its kernel count (graph nodes, ~2 µs each), and eager aten has
one kernel per arithmetic step. Each module here fuses one idea into one Triton kernel and
registers it as a custom op with three implementations: CUDA (the Triton kernel, one launch, no
host sync, its output allocated like any aten op's, so it is captured in CUDA graphs), the CPU
(the eager aten composition, which is also the reference the kernel is tested against) and fake
(shapes only: the meta device, where `liveplex.bench.counts` counts it as the one kernel it is on
CUDA). Call sites call each module's dispatching function (`gate.gated`, `noise.lane_noise`,
`race.race_draw`), which picks the op or the eager composition by `fusion.fused` alone.

Modules: `fusion` (where fused ops run), `gate` (SiLU-and-gate of the gated FFNs), `noise` (the
sampling noise of every draw), `race` (a draw's race among its top-k candidates), `kv8` (the 8-bit
KV ring's quantized write and its varlen attention; the ring calls it, `personaplex.ring`). The kernels live
beside the model code they replace, in `personaplex`, since they are its arithmetic, and need
Triton only where they run: without it (the CPU wheel) the package imports and every call site runs
the eager ops.
"""

from liveplex.personaplex.kernels.fusion import TRITON, fused
from liveplex.personaplex.kernels.gate import gated
from liveplex.personaplex.kernels.noise import lane_noise
from liveplex.personaplex.kernels.race import race_draw

__all__ = ["TRITON", "fused", "gated", "lane_noise", "race_draw"]
