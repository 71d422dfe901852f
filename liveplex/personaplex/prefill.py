"""Admitting sessions: the per-voice KV prefix cache and the ragged prefill of newcomers' prompts.

Decision D6 (spec personaplex §4.5, §4.6). Positions 0..N-1 hold the same voice embeddings for
every session with a given voice, so their K/V is computed once per voice and copied into a new
slot. The newcomers of a tick then go through one packed forward of their token rows (temporal
transformer only: every token of the prompt is teacher-forced, so there is nothing to draw).
Under `upstream` the admission draw follows: text and agent cb0 of column P from the last row,
and the session's Mimi decoder starts primed (`primed_codec_state`) instead of fresh.
"""

from __future__ import annotations

import dataclasses

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


@dataclasses.dataclass(frozen=True, slots=True)
class VoicePrefix:
    """The K and V of a voice's N embedding rows, per layer [heads, N, head_dim]."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]

    @property
    def frames(self) -> int:
        return self.k[0].shape[1]


@torch.no_grad()
def voice_prefix(temp: temporal.Temporal, voice: torch.Tensor) -> VoicePrefix:
    """Run a voice's [N, dim] embeddings from position 0 and keep their K/V (once per voice; N = 0
    for Moshi's empty prompt: no rows)."""
    N = voice.shape[0]
    assert N <= temp.cfg.context - 2, f"a voice of {N} frames does not fit a context of {temp.cfg.context}"
    scratch = temp.new_pool(1)
    if N:
        temp.forward_rows(voice.to(temp.text_linear.weight.dtype), [temporal.Segment(0, 0, N)], scratch)
    return VoicePrefix([k[0, :, :N].clone() for k in scratch.k], [v[0, :, :N].clone() for v in scratch.v])


@dataclasses.dataclass(frozen=True, slots=True)
class Newcomer:
    """A session to prefill into `slot`."""

    slot: int
    prompt: prompt.Prompt
    prefix: VoicePrefix
    seed: int


@torch.no_grad()
def admit(temp: temporal.Temporal, dep: depformer.Depformer, pool: ring.KVPool, state: step.TokenState,
          newcomers: list[Newcomer], schedule: prompt.Schedule, sample: sampling.Sampling) -> torch.Tensor:
    """Prefill newcomers in one ragged forward and set their start state.

    Returns the `out_norm`ed last prompt row of each newcomer, [n, dim]. Raises nothing for a
    well-formed prompt; a prompt that would not fit the window is a programming error (the
    role-prompt limit and the token-count backstop keep them out).
    """
    segments = []
    for n in newcomers:
        N = n.prefix.frames
        assert N == n.prompt.voice_frames
        assert n.prompt.total <= temp.cfg.context - 1, "prompt does not fit the window"
        for layer in range(len(pool.k)):
            pool.k[layer][n.slot, :, :N] = n.prefix.k[layer]
            pool.v[layer][n.slot, :, :N] = n.prefix.v[layer]
        segments.append(temporal.Segment(n.slot, N, n.prompt.columns.shape[0]))
    columns = torch.cat([n.prompt.columns for n in newcomers]).to(pool.k[0].device)
    h = temp.forward_rows(temp.embed(columns), segments, pool)
    ends = torch.cumsum(torch.tensor([s.length for s in segments]), 0) - 1
    last = h[ends.to(h.device)]
    admission: list[tuple[int, int] | None] = [None] * len(newcomers)
    if schedule is prompt.Schedule.UPSTREAM:
        column = torch.tensor([n.prompt.total for n in newcomers], device=h.device)
        seed = torch.tensor([n.seed for n in newcomers], device=h.device)
        text, _ = step.draw_text(last, temp, column, seed, sample)
        lg = dep.step(0, last, text, dep.new_frame())
        cb0 = sampling.draw(lg, greedy=sample.greedy, temperature=sample.audio_temperature,
                            top_k=sample.audio_top_k, seed=seed, column=column, stream=1)
        admission = [(int(t), int(a)) for t, a in zip(text.tolist(), cb0.tolist())]
    for n, adm in zip(newcomers, admission):
        state.start(n.slot, schedule, prompt.start_position(n.prompt, schedule), n.seed, n.prompt.tail, adm)
    return last


@torch.no_grad()
def primed_codec_state(codec: mimi.Mimi) -> mimi.MimiState:
    """One row of Mimi state whose decoder has decoded one silence frame from fresh (spec §3.4).

    An `upstream` session's decoder starts from this (`state.decoder.copy_rows([slot],
    primed.decoder, [0])`): its first frame is what the reference emits on its second tick, after
    the silence frame, so its audio equals the reference's one tick earlier. Computed once at
    startup; its encoder part is fresh and unused.
    """
    state = codec.init_state(1)
    codec.decode_step(torch.tensor([config.SILENCE], device=codec.device), state)
    return state
