"""Admitting sessions: the per-voice KV prefix cache and the ragged, chunked prefill of prompts.

Decision D6 (spec personaplex §4.5, §4.6). Positions 0..N-1 hold the same voice embeddings for
every session with a given voice, so their K/V is computed once per voice and copied into a new
slot. The prompt rows of the tick's newcomers then go through one packed forward (temporal
transformer only: every token of the prompt is teacher-forced, so there is nothing to draw). A
long prompt may be split across ticks (`Chunk`): each chunk attends to its ring's prefix, which
holds everything before it. After a newcomer's last chunk its start state is set and, under
`upstream`, the admission draw follows: text and agent cb0 of column P from the last row, and
the session's Mimi decoder starts primed (`primed_codec_state`) instead of fresh.

No host synchronisation: everything the device needs (token columns, positions, offsets, seeds,
tails) is packed on the host into one int64 block and copied once, through a pinned staging
buffer when the caller has one (`staging.Upload`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from liveplex.personaplex import (
    config,
    depformer,
    mimi,
    prompt,
    ring,
    sampling,
    step,
    temporal,
)

Upload = Callable[[torch.Tensor], torch.Tensor]
"""Copies a host tensor to the device (the engine's pinned staging, or a plain `.to(device)`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class VoicePrefix:
    """The K and V of a voice's N embedding rows, [layers, N, 2, heads, head_dim] (`ring.KVPool`'s layout)."""

    kv: torch.Tensor

    @property
    def frames(self) -> int:
        return self.kv.shape[1]


@torch.no_grad()
def voice_prefix(temp: temporal.Temporal, voice: torch.Tensor, kv_dtype: torch.dtype | None = None) -> VoicePrefix:
    """Run a voice's [N, dim] embeddings from position 0 and keep their K/V (once per voice; N = 0
    for Moshi's empty prompt: no rows), in the rings' `kv_dtype` (default: the weights')."""
    N = voice.shape[0]
    assert N <= temp.cfg.context - 2, f"a voice of {N} frames does not fit a context of {temp.cfg.context}"
    scratch = temp.new_pool(1, kv_dtype)
    if N:
        temp.forward_rows(voice.to(temp.text_linear.weight.dtype), [temporal.Segment(0, 0, N)], scratch)
    return VoicePrefix(scratch.kv[0, :, :N].clone())


@dataclasses.dataclass(frozen=True, slots=True)
class Newcomer:
    """A session to prefill into `slot`."""

    slot: int
    prompt: prompt.Prompt
    prefix: VoicePrefix
    seed: int

    @property
    def rows(self) -> int:
        """Prompt rows to prefill after the voice prefix."""
        return self.prompt.columns.shape[0]


@dataclasses.dataclass(frozen=True, slots=True)
class Chunk:
    """Prompt rows first..stop-1 of a newcomer, prefilled in one tick."""

    newcomer: Newcomer
    first: int = 0
    stop: int | None = None

    @property
    def end(self) -> int:
        return self.newcomer.rows if self.stop is None else self.stop

    @property
    def last(self) -> bool:
        """The newcomer's prompt is complete after this chunk."""
        return self.end == self.newcomer.rows


def block_numel(rows: int) -> int:
    """The largest host block of a call prefilling at most `rows` prompt rows (`_pack`)."""
    return 19 * rows + 1 + 22 * rows


def _pack(chunks: Sequence[Chunk], context: int) -> tuple[torch.Tensor, list[ring.Run]]:
    """The host block the device needs, and the runs (host ints).

    Layout (int64): columns [R, 17], row slot [R], row position [R], cu_q [n + 1], used [n], then
    for the finishing newcomers f: last row [f], start position [f], sampling key [f], total [f], tail [f, 17].
    """
    runs, cols, row_slot, row_pos, cu, used = [], [], [], [], [0], []
    for c in chunks:
        n = c.newcomer
        start = n.prefix.frames + c.first
        length = c.end - c.first
        assert n.prompt.total <= context - 1, "prompt does not fit the window"
        runs.append(ring.Run(n.slot, cu[-1], length, start))
        cols.append(n.prompt.columns[c.first:c.end])
        row_slot += [n.slot] * length
        row_pos += range(start, start + length)
        cu.append(cu[-1] + length)
        used.append(start + length)
    done = [(c, r) for c, r in zip(chunks, runs) if c.last]
    tail = [r.first + r.length - 1 for _, r in done]
    tail += [prompt.start_position(c.newcomer.prompt, prompt.Schedule.UPSTREAM) for c, _ in done]
    tail += [sampling.key(c.newcomer.seed) for c, _ in done] + [c.newcomer.prompt.total for c, _ in done]
    block = [torch.cat(cols).reshape(-1), torch.tensor(row_slot + row_pos + cu + used + tail, dtype=torch.long)]
    block += [c.newcomer.prompt.tail.long() for c, _ in done]
    return torch.cat(block), runs


@torch.no_grad()
def admit(temp: temporal.Temporal, dep: depformer.Depformer, pool: ring.KVPool, state: step.TokenState,
          chunks: Sequence[Chunk | Newcomer], schedule: prompt.Schedule, sample: sampling.Sampling,
          backend: ring.Backend = ring.Backend.MASKED, upload: Upload | None = None) -> torch.Tensor:
    """Prefill chunks of newcomers' prompts in one ragged forward; start the newcomers whose prompt
    is then complete. A `Newcomer` is its whole prompt.

    Chunks are in ascending, consecutive slots with one chunk per newcomer, only the last of them
    partial, and a newcomer's chunks come in order in successive calls. Returns the `out_norm`ed
    last prompt row of each newcomer started, [f, dim]. A prompt that would not fit the window
    is a programming error (the role-prompt limit and the token-count backstop keep them out).
    """
    chunks = [c if isinstance(c, Chunk) else Chunk(c) for c in chunks]
    device = pool.kv.device
    slots_ = [c.newcomer.slot for c in chunks]
    assert slots_ == list(range(slots_[0], slots_[0] + len(slots_))), "newcomers take consecutive slots"
    for c in chunks:  # every chunk: padding rows of the ticks between chunks wrote position 0
        N = c.newcomer.prefix.frames
        assert N == c.newcomer.prompt.voice_frames and (N or c.first == 0), "only a voiced prompt splits"
        pool.kv[c.newcomer.slot, :, :N] = c.newcomer.prefix.kv
    host, runs = _pack(chunks, pool.context)
    block = upload(host) if upload is not None else host.to(device)
    R, n, f = sum(r.length for r in runs), len(runs), sum(c.last for c in chunks)
    parts = torch.split(block, [17 * R, R, R, n + 1, n, f, f, f, f, 17 * f])
    columns, row_slot, row_pos, cu_q, used, ends, start, key, total, tail = parts
    plan = ring.rows_plan(row_slot, row_pos, cu_q.to(torch.int32), used.to(torch.int32), runs, pool, backend)
    h = temp.forward(temp.embed(columns.view(R, 17)), row_pos, pool, plan)
    last = h[ends]
    if not f:
        return last
    done = chunks[:f]
    assert all(c.last for c in done), "only the last chunk of a call may be partial"
    rows = slice(done[0].newcomer.slot, done[-1].newcomer.slot + 1)
    admission = None
    if schedule is prompt.Schedule.UPSTREAM:
        draws = step.sampled_draws(sample, key, total, temp.cfg.text_card, temp.cfg.card)
        text = draws(temp.text_logits(last), 0)
        cb0 = draws(dep.step(0, last, text, dep.new_frame(f)), 1)
        admission = torch.stack([text, cb0], dim=1)
    position = start if schedule is prompt.Schedule.UPSTREAM else start - 1
    state.start(rows, schedule, position, key, tail.view(f, 17), admission)
    return last


@torch.no_grad()
def primed_codec_state(codec: mimi.Mimi) -> mimi.MimiState:
    """One row of Mimi state whose decoder has decoded one silence frame from fresh (spec §3.4).

    An `upstream` session's decoder starts from this (`state.decoder.copy_rows(rows,
    primed.decoder, slice(0, 1))`): its first frame is what the reference emits on its second tick,
    after the silence frame, so its audio equals the reference's one tick earlier. Computed once at
    startup; its encoder part is fresh and unused.
    """
    state = codec.init_state(1)
    codec.decode_step(torch.tensor([config.SILENCE], device=codec.device), state)
    return state
