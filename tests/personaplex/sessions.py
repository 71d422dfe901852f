"""Test sessions and a minimal batched driver over the package's prompt, prefill and step code.

The driver does what the engine does between ticks, without the engine's slots and lines:
sessions take slots 0, 1, 2... in arrival order and never leave. Caller audio is given as codes
(the `force_user_codes` hook), so these tests do not depend on Mimi.
"""

from __future__ import annotations

import dataclasses

import torch

from liveplex.personaplex import config, prefill, prompt, sampling, step
from tests.personaplex import reference_step


@dataclasses.dataclass(frozen=True)
class Spec:
    """One session: voice (embeddings and token ring), role ids, caller codes, seed."""

    voice: torch.Tensor  # [N, dim]
    cache: torch.Tensor  # [1, 17, 4]
    role_ids: list[int]
    user: torch.Tensor  # [T, 8]
    seed: int


def make_spec(dim: int, frames: int, voice_frames: int, role_len: int, seed: int) -> Spec:
    """A random voice whose ring follows spec §4.2's column rules, random role ids and caller codes."""
    gen = torch.Generator().manual_seed(seed)
    N = voice_frames
    v = torch.randint(0, 2048, (N + 1, 8), generator=gen)  # Mimi codes of the voice clip's frames
    cache = torch.zeros(1, 17, 4, dtype=torch.long)
    col_n = [config.TEXT_PAD, int(v[N, 0]), *v[N - 1, 1:].tolist(), *config.SINE]
    col_next = [config.TEXT_PAD, 0, *v[N, 1:].tolist(), 0, *config.SINE[1:]]
    cache[0, :, N % 4] = torch.tensor(col_n)
    cache[0, :, (N + 1) % 4] = torch.tensor(col_next)
    return Spec(
        voice=torch.randn(N, dim, generator=gen),
        cache=cache,
        role_ids=torch.randint(4, 400, (role_len,), generator=gen).tolist(),
        user=torch.randint(0, 2048, (frames, 8), generator=gen),
        seed=seed,
    )


def ring_columns(spec: Spec) -> tuple[torch.Tensor, torch.Tensor]:
    N = spec.voice.shape[0]
    return spec.cache[0, :, N % 4], spec.cache[0, :, (N + 1) % 4]


@dataclasses.dataclass
class Run:
    """Per-tick outputs of one session in the driver."""

    emitted: list[list[int]] = dataclasses.field(default_factory=list)
    fed: list[list[int]] = dataclasses.field(default_factory=list)
    drawn: list[list[int]] = dataclasses.field(default_factory=list)
    text_logits: list[torch.Tensor] = dataclasses.field(default_factory=list)
    audio_logits: list[torch.Tensor] = dataclasses.field(default_factory=list)


@torch.no_grad()
def drive(lm, specs: list[tuple[Spec, int]], ticks: int, schedule: prompt.Schedule,
          sample: sampling.Sampling, force: list[list[list[int]] | None] | None = None) -> list[Run]:
    """Run sessions admitted at the given ticks until `ticks`; returns one `Run` per session.

    force[i][t] is session i's draws at its live tick t (text + agent cb0..7, -1 = draw).
    """
    temp, dep = lm.temporal, lm.depformer
    pool = temp.new_pool(len(specs))
    state = step.TokenState.allocate(len(specs))
    prefixes: dict[int, prefill.VoicePrefix] = {}
    runs = [Run() for _ in specs]
    live: list[int] = []  # session index per slot
    for tick in range(ticks):
        newcomers = []
        for i, (spec, at) in enumerate(specs):
            if at == tick:
                key = id(spec.voice)
                if key not in prefixes:
                    prefixes[key] = prefill.voice_prefix(temp, spec.voice)
                p = prompt.layout(spec.voice, *ring_columns(spec), spec.role_ids, schedule)
                newcomers.append(prefill.Newcomer(len(live), p, prefixes[key], spec.seed))
                live.append(i)
        if newcomers:
            prefill.admit(temp, dep, pool, state, newcomers, schedule, sample)
        if not live:
            continue
        t_of = [tick - specs[i][1] for i in live]
        user = torch.stack([specs[i][0].user[t] for i, t in zip(live, t_of)])
        forced = None
        if force is not None:
            forced = torch.tensor([force[i][t] if force[i] is not None else [-1] * 9 for i, t in zip(live, t_of)])
        out = step.live_step(temp, dep, pool, state, user, schedule, sample, forced)
        for row, i in enumerate(live):
            r = runs[i]
            r.emitted.append(out.emitted[row].tolist())
            r.fed.append(out.fed[row].tolist())
            r.drawn.append(out.drawn[row].tolist())
            r.text_logits.append(out.text_logits[row])
            r.audio_logits.append(out.audio_logits[row])
    return runs


def reference_run(upstream_lm, spec: Spec, frames: int,
                  force: list[list[int]] | None = None) -> reference_step.Record:
    """The test reference over the prompt and `frames` live calls (greedy unless forced)."""
    ref = reference_step.Reference(upstream_lm, spec.voice, spec.cache)
    try:
        ref.prompt(spec.role_ids)
        for t in range(frames):
            ref.step(user=spec.user[t].tolist(), force=None if force is None else force[t])
        return ref.rec
    finally:
        ref.close()


def top2_margin(logits: torch.Tensor) -> float:
    top = torch.topk(logits.float(), 2).values
    return float(top[0] - top[1])
