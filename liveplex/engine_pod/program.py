"""The device side of a tick: the per-slot pools and `program(Bk)` over their rows 0..Bk-1.

Spec personaplex §5.3, §5.5, §5.7. `Pools` holds every per-session tensor with a leading slot
dimension, allocated once. `Program.run(Bk)` encodes each row's caller frame with Mimi, runs the
live step (temporal transformer at each row's position, text head, 8 depformer steps, draws),
decodes the emitted agent frame with Mimi and rounds it to int16, with no host synchronisation.
On CUDA each bucket's program is captured once as a CUDA graph (largest first, one shared memory
pool) and replayed; on CPU it runs eagerly. Outputs live in the returned tensors; the engine
copies them to the host once per tick.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from liveplex.live import frames
from liveplex.personaplex import checkpoint, mimi, prompt, ring, sampling, step


@dataclass(frozen=True, slots=True)
class TickOutput:
    """What `program(Bk)` leaves for rows 0..Bk-1 (device tensors)."""

    emitted: torch.Tensor
    """[Bk, 9] int64: text id and agent cb0..7 of the frame played now."""
    pcm: torch.Tensor
    """[Bk, 1920] int16: that frame, decoded."""
    finite: torch.Tensor
    """[Bk] bool: logits and PCM of the row are finite (spec §5.11)."""
    text_logits: torch.Tensor
    """[Bk, text_card] fp32 (tests compare them)."""


class Pools:
    """Every per-slot tensor, allocated once for `slots` sessions and never resized."""

    def __init__(self, lm: checkpoint.LM, codec: mimi.Mimi, slots: int) -> None:
        device = lm.temporal.text_linear.weight.device
        self.slots = slots
        self.kv: ring.KVPool = lm.temporal.new_pool(slots)
        self.codec = codec.init_state(slots)
        self.tokens = step.TokenState.allocate(slots, device)
        self.pcm_in = torch.zeros(slots, frames.FRAME_SAMPLES, dtype=torch.float32, device=device)
        """Caller frames in [-1, 1], written by the host before each tick."""

    def move(self, src: int, dst: int) -> None:
        """Compaction: slot `src`'s session continues in slot `dst`."""
        self.kv.copy_slot(src, dst)
        self.codec.copy_rows([dst], self.codec, [src])
        self.tokens.copy_slot(src, dst)

    def clear(self, slot: int) -> None:
        """Zero every row of `slot` (after a non-finite session: masked NaN still poisons 0 x NaN)."""
        self.kv.clear(slot)
        self.codec.reset([slot])
        for t in (self.tokens.pos, self.tokens.ahead, self.tokens.u1, self.tokens.u2,
                  self.tokens.forced, self.tokens.forcing, self.tokens.seed):
            t[slot] = 0

    def clear_all(self) -> None:
        """Back to the freshly allocated state (after graph capture and warm-up)."""
        for slot in range(self.slots):
            self.clear(slot)

    @property
    def slot_bytes(self) -> int:
        """Device bytes per slot, every pool included."""
        tokens = sum(t[0].numel() * t.element_size() for t in (
            self.tokens.pos, self.tokens.ahead, self.tokens.u1, self.tokens.u2, self.tokens.forced,
            self.tokens.forcing, self.tokens.seed, self.pcm_in))
        return self.kv.nbytes_per_slot + self.codec.nbytes // self.slots + tokens


class Program:
    """`run(Bk)`: one tick over pool rows 0..Bk-1, eager or as a replayed CUDA graph."""

    def __init__(self, lm: checkpoint.LM, codec: mimi.Mimi, pools: Pools, schedule: prompt.Schedule,
                 sample: sampling.Sampling, graphs: bool) -> None:
        self._lm = lm
        self._codec = codec
        self._pools = pools
        self._schedule = schedule
        self._sample = sample
        self._graphs_on = graphs and pools.pcm_in.is_cuda
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph, TickOutput]] = {}
        self._graph_pool: tuple[int, int] | None = None

    @property
    def graphs(self) -> bool:
        return self._graphs_on

    def run(self, bucket: int) -> TickOutput:
        """One tick of rows 0..bucket-1; advances their state in place."""
        if not self._graphs_on:
            return self._eager(bucket)
        if bucket not in self._graphs:
            self.capture([bucket])
        graph, out = self._graphs[bucket]
        graph.replay()
        return out

    def capture(self, buckets: list[int]) -> None:
        """Capture the given buckets' graphs, largest first, into one shared memory pool.

        Each is run eagerly on a side stream first (kernel selection, allocator warm-up); the
        caller resets the pools afterwards, since those runs advance free slots' state.
        """
        if not self._graphs_on:
            return
        if self._graph_pool is None:
            self._graph_pool = torch.cuda.graph_pool_handle()
        for bucket in sorted(set(buckets) - set(self._graphs), reverse=True):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._eager(bucket)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._graph_pool):
                out = self._eager(bucket)
            self._graphs[bucket] = (graph, out)

    @torch.no_grad()
    def _eager(self, bucket: int) -> TickOutput:
        p = self._pools
        rows = p.codec.head(bucket)
        user = self._codec.encode_step(p.pcm_in[:bucket], rows)
        out = step.live_step(self._lm.temporal, self._lm.depformer, p.kv, p.tokens, user, self._schedule,
                             self._sample)
        pcm = self._codec.decode_step(out.emitted[:, 1:], rows)
        finite = (torch.isfinite(out.text_logits).all(1) & torch.isfinite(out.audio_logits).flatten(1).all(1)
                  & torch.isfinite(pcm).all(1))
        pcm16 = torch.round(torch.clamp(torch.nan_to_num(pcm), -1.0, 1.0) * 32767.0).to(torch.int16)
        return TickOutput(out.emitted, pcm16, finite, out.text_logits)

