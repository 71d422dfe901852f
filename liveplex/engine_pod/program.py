"""The device side of a tick: the per-slot pools and `program(Bk)` over their rows 0..Bk-1.

Spec personaplex §5.3, §5.5, §5.7. `Pools` holds every per-session tensor with a leading slot
dimension, allocated once. `Program.run(Bk)` encodes each row's caller frame with Mimi, runs the
live step (temporal transformer at each row's position, text head, 8 depformer steps, draws),
decodes the emitted agent frame with Mimi and rounds it to int16, with no host synchronisation,
and packs everything the host needs into one int32 tensor, so the engine copies one tensor down
per tick. On CUDA each bucket's program is captured once as a CUDA graph (largest first, one
shared memory pool) at startup and replayed; on CPU it runs eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from liveplex.live import frames
from liveplex.personaplex import checkpoint, config, mimi, prompt, ring, sampling, slots, step

if TYPE_CHECKING:
    from torch.cuda import _POOL_HANDLE  # torch names the graph pool handle's type only here

EMITTED = slice(0, 1 + config.AGENT_CODEBOOKS)
"""Columns of `TickOutput.packed`: text id and agent cb0..7 of the frame played now..."""
FINITE = 1 + config.AGENT_CODEBOOKS
"""...1 where the row's logits and PCM are all finite (spec §5.11)..."""
SAID = FINITE + 1
"""...how many of the slot's commentary ids it has said (`TokenState.say_at`)..."""
PCM = slice(SAID + 1, SAID + 1 + frames.FRAME_SAMPLES)
"""...that frame, decoded, as int16 values..."""
FED = slice(PCM.stop, PCM.stop + config.NUM_STREAMS)
"""...the 17 token ids the row fed (`step.StepOutput.fed`: the session's history)..."""
TAIL = slice(FED.stop, FED.stop + 1 + 3 * config.AGENT_CODEBOOKS)
"""...and the row's token state after the tick that the next column is made of (`ahead`, `u1`,
`u2`: 25 ids), the tail of a resume record's chunk (docs/continuity.md)."""
PACKED_WIDTH = TAIL.stop


@dataclass(frozen=True, slots=True)
class TickOutput:
    """What `program(Bk)` leaves for rows 0..Bk-1 (a device tensor)."""

    packed: torch.Tensor
    """[Bk, PACKED_WIDTH] int32: `EMITTED`, `FINITE`, `SAID`, `PCM`, `FED`, `TAIL` columns."""


def pinned_block_bytes(nbytes: int) -> int:
    """The pinned host memory torch holds for one pinned allocation of `nbytes`: its caching host
    allocator (torch 2.13, `ATen/core/CachingHostAllocator.h`, `allocate`) rounds every request up
    to a power of two (`c10::llvm::PowerOf2Ceil`) unless `PYTORCH_CUDA_ALLOC_CONF` sets
    `pinned_max_round_threshold_mb` or `pinned_max_cached_size_mb` below it, and keeps a freed block
    cached for the next request of its size class, page-locked. The engine sets neither (with them
    torch would either hand out a cached block by size class alone, unchecked against the request,
    or free each block with `cudaFreeHost`), so a park holds this much per tensor (docs/pause.md)."""
    return 1 << (nbytes - 1).bit_length() if nbytes > 1 else nbytes


def held_bytes(sizes: list[int], pinned: bool) -> int:
    """Host memory held by allocations of `sizes` bytes: each a power-of-two pinned block when
    `pinned` (`pinned_block_bytes`), exactly its size otherwise (the CPU's plain tensors)."""
    return sum(map(pinned_block_bytes, sizes)) if pinned else sum(sizes)


@dataclass(frozen=True, slots=True)
class HostRows:
    """One slot's rows of every pool that holds session state, in host memory (`Pools.park`):
    pinned on CUDA, plain on the CPU. `pcm_in` is not among them: each tick overwrites it."""

    kv: ring.KVPool
    codec: mimi.MimiState
    tokens: step.TokenState
    pinned: bool = False
    """Pinned (parked from CUDA): each tensor is a block of torch's pinned host allocator."""

    def states(self) -> tuple[slots.RowState, ...]:
        """In `Pools._states` order."""
        return (self.kv, self.codec, self.tokens)

    @property
    def nbytes(self) -> int:
        """The rows' bytes: what a park or a wake copies."""
        return sum(s.nbytes for s in self.states())

    @property
    def held_bytes(self) -> int:
        """The host memory they hold: `nbytes`, each pinned tensor rounded up to its block
        (`pinned_block_bytes`): what the pod's host budget counts (`Parked.nbytes`)."""
        return held_bytes([t.numel() * t.element_size() for s in self.states() for t in s.tensors()], self.pinned)


class Pools:
    """Every per-slot tensor, allocated once for `slots` sessions and never resized."""

    def __init__(self, lm: checkpoint.LM, codec: mimi.Mimi, slots_: int, kv_dtype: torch.dtype | None = None) -> None:
        device = lm.temporal.text_linear.weight.device
        self.slots = slots_
        self.kv: ring.KVPool = lm.temporal.new_pool(slots_, kv_dtype)
        self.offsets = ring.Offsets.of(self.kv)
        self.codec = codec.init_state(slots_)
        self.tokens = step.TokenState.allocate(slots_, device)
        self.pcm_in = torch.zeros(slots_, frames.FRAME_SAMPLES, dtype=torch.float32, device=device)
        """Caller frames in [-1, 1], copied up by the host before each tick."""

    def _states(self) -> tuple[slots.RowState, ...]:
        return (self.kv, self.codec, self.tokens)

    def view(self, rows: slice) -> Pools:
        """Rows `rows` of these pools as pools of their own, on the same storage: a tick group's
        (issue 44), whose `Program` runs its buckets from its first row."""
        view = object.__new__(Pools)
        view.slots = rows.stop - rows.start
        view.kv = self.kv.rows(rows)
        view.offsets = ring.Offsets.of(view.kv)
        view.codec = self.codec.rows(rows)
        view.tokens = self.tokens.rows(rows)
        view.pcm_in = self.pcm_in[rows]
        return view

    def move(self, src: int, dst: int) -> None:
        """Compaction: slot `src`'s session continues in slot `dst`."""
        for state in self._states():
            state.copy_rows(slice(dst, dst + 1), state, slice(src, src + 1))

    def park(self, slot: int, non_blocking: bool = False) -> HostRows:
        """Slot `slot`'s rows of every pool, copied to host memory (a pause, docs/pause.md);
        `non_blocking` on CUDA: queued on the current stream (`copies.Copies.down`)."""
        return HostRows(self.kv.parked(slot, non_blocking), self.codec.parked(slot, non_blocking),
                        self.tokens.parked(slot, non_blocking), pinned=self.kv.kv.is_cuda)

    def unpark(self, slot: int, parked: HostRows, non_blocking: bool = False) -> None:
        """`park`'s rows back into slot `slot` (a wake): the session continues there as it was;
        `non_blocking` on CUDA: queued on the current stream (`copies.Copies.up`)."""
        for state, rows in zip(self._states(), parked.states(), strict=True):
            state.copy_rows(slice(slot, slot + 1), rows, slice(0, 1), non_blocking)

    def reset(self, rows: slots.Rows) -> None:
        """Zero every row of `rows` (a newcomer's slot; after a non-finite session, whose masked
        NaNs would still poison 0 x NaN)."""
        for state in self._states():
            state.reset(rows)

    def tensors(self) -> list[torch.Tensor]:
        """Every pool tensor, the ring offsets and an e4m3 ring's scales."""
        offsets = [self.offsets.starts, self.offsets.cu_k, self.offsets.cu_q]
        offsets += [t for t in (self.kv.scale, self.kv.inverse) if t is not None]
        return [t for state in self._states() for t in state.tensors()] + [self.pcm_in] + offsets

    def park_sizes(self) -> list[int]:
        """The bytes of each host tensor a park of one slot allocates (`park`, `HostRows`)."""
        return [t[0].numel() * t.element_size() for state in self._states() for t in state.tensors()]

    @property
    def slot_bytes(self) -> int:
        """Device bytes per slot, every pool included."""
        return sum(s.nbytes for s in self._states()) // self.slots + self.pcm_in[0].numel() * 4


class Program:
    """`run(Bk)`: one tick over pool rows 0..Bk-1, eager or as a replayed CUDA graph."""

    def __init__(self, lm: checkpoint.LM, codec: mimi.Mimi, pools: Pools, schedule: prompt.Schedule,
                 sample: sampling.Sampling, graphs: bool, backend: ring.Backend = ring.Backend.MASKED) -> None:
        self._lm = lm
        self._codec = codec
        self._pools = pools
        self._schedule = schedule
        self._sample = sample
        self._backend = backend
        self._graphs_on = graphs and pools.pcm_in.is_cuda
        cfg, device = lm.temporal.cfg, pools.pcm_in.device
        cards = step.draw_cards(cfg.text_card, cfg.card)
        self._lanes = None if device.type == "cpu" else sampling.Lanes.of(cards, device)
        """Off the CPU a tick hashes the noise of every token id at once (`step.sampled_draws`)."""
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph, TickOutput]] = {}
        self._graph_pool: _POOL_HANDLE | None = None

    @property
    def graphs(self) -> bool:
        return self._graphs_on

    @property
    def graph_pool(self) -> _POOL_HANDLE | None:
        """The memory pool its graphs were captured into (None before a capture)."""
        return self._graph_pool

    @property
    def captured(self) -> int:
        """CUDA graphs held (one per bucket captured)."""
        return len(self._graphs)

    def run(self, bucket: int, span: int | None = None) -> TickOutput:
        """One tick of rows 0..bucket-1; advances their state in place.

        `span`: under `masked`, the ring slots read (an upper bound of every row's valid length,
        which the host knows); ignored under graphs, which read the whole ring.
        """
        if not self._graphs_on:
            return self._eager(bucket, span or self._pools.kv.context)
        assert bucket in self._graphs, f"bucket {bucket} was not captured at startup"
        graph, out = self._graphs[bucket]
        graph.replay()
        return out

    def capture(self, buckets: list[int], pool: _POOL_HANDLE | None = None) -> None:
        """At startup: capture the buckets' graphs, largest first, into one shared memory pool
        (`pool`: another program's, so every tick group's graphs share one).

        Each is run eagerly on a side stream first (kernel selection, allocator warm-up). Warm-up
        and capture both advance the rows they run, so this runs before any session holds a slot
        and the caller resets the pools afterwards.
        """
        if not self._graphs_on:
            return
        if self._graph_pool is None:
            self._graph_pool = pool or torch.cuda.graph_pool_handle()
        context = self._pools.kv.context
        for bucket in sorted(set(buckets) - set(self._graphs), reverse=True):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._eager(bucket, context)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._graph_pool):
                out = self._eager(bucket, context)
            self._graphs[bucket] = (graph, out)

    @torch.no_grad()
    def _eager(self, bucket: int, span: int) -> TickOutput:
        p, cfg = self._pools, self._lm.temporal.cfg
        rows = p.codec.head(bucket)
        user = self._codec.encode_step(p.pcm_in[:bucket], rows)
        pos = p.tokens.pos[:bucket]
        plan = ring.live_plan(pos, p.kv, p.offsets, self._backend, span)
        draw = step.sampled_draws(self._sample, p.tokens.key[:bucket], pos + 1, cfg.text_card, cfg.card, self._lanes)
        out = step.live_step(self._lm.temporal, self._lm.depformer, p.kv, p.tokens, user, self._schedule, draw, plan)
        pcm = self._codec.decode_step(out.emitted[:, 1:], rows)
        # An inf or NaN anywhere makes a row's sum inf or NaN (so does an overflow, only at values near
        # fp32's limit); 0 * x is 0 exactly for finite x. Five kernels where `isfinite(...).all()` takes 15.
        total = out.text_logits.sum(1) + out.audio_logits.sum((1, 2)) + pcm.sum(1)
        finite = total * 0 == 0
        pcm16 = torch.round(torch.clamp(torch.nan_to_num(pcm), -1.0, 1.0) * 32767.0)
        # One cat in fp32 (exact for token ids, the flag and int16 samples), then one cast.
        said = p.tokens.say_at[:bucket, None]
        t = p.tokens
        return TickOutput(torch.cat([out.emitted, finite[:, None], said, pcm16, out.fed, t.ahead[:bucket],
                                     t.u1[:bucket], t.u2[:bucket]], dim=1).int())
