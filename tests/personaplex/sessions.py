"""Test sessions and a minimal batched driver over the package's prompt, prefill, step and Mimi code.

The driver does what the engine does in a tick, without the engine's slots and lines: sessions
take slots 0, 1, 2... in arrival order and never leave. Each tick, our Mimi encodes every live
session's caller frame in one batched call, the live step runs, and our Mimi decodes the emitted
agent frames. The `force_user_codes` hook replaces the codes Mimi produced (still recorded) with
given ones, as spec §6.6 asks, so a float-level near-tie in Mimi cannot derail a comparison.
"""

from __future__ import annotations

import dataclasses

import torch

from liveplex.personaplex import config, mimi, prefill, prompt, sampling, step
from tests.personaplex import mimi_fixtures, reference_step

FRAME = 1920


@dataclasses.dataclass(frozen=True)
class Spec:
    """One session: voice (embeddings and token ring), role ids, caller audio, seed."""

    voice: torch.Tensor  # [N, dim]
    cache: torch.Tensor  # [1, 17, 4]
    role_ids: list[int]
    audio: torch.Tensor  # [T, 1920] caller frames at 24 kHz
    seed: int


def make_spec(dim: int, frames: int, voice_frames: int, role_len: int, seed: int) -> Spec:
    """A random voice whose ring follows spec §4.2's column rules, random role ids, caller audio
    (a tone sweep plus noise, different per seed)."""
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
        audio=mimi_fixtures.caller_audio(1, frames, seed)[0].view(frames, FRAME),
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
    encoded: list[list[int]] = dataclasses.field(default_factory=list)  # the codes our Mimi produced
    pcm: list[torch.Tensor] = dataclasses.field(default_factory=list)  # [1920] decoded agent frame


@torch.no_grad()
def drive(lm, codec: mimi.Mimi, specs: list[tuple[Spec, int]], ticks: int, schedule: prompt.Schedule,
          sample: sampling.Sampling, force: list[list[list[int]] | None] | None = None,
          force_user: list[list[list[int]]] | None = None) -> list[Run]:
    """Run sessions admitted at the given ticks until `ticks`; returns one `Run` per session.

    force[i][t] is session i's draws at its live tick t (text + agent cb0..7, -1 = draw);
    force_user[i][t] its user codes at that tick instead of what our Mimi encoded.
    """
    temp, dep = lm.temporal, lm.depformer
    pool = temp.new_pool(len(specs))
    state = step.TokenState.allocate(len(specs))
    codec_state = codec.init_state(len(specs))
    primed = prefill.primed_codec_state(codec)
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
            slots = slice(newcomers[0].slot, newcomers[-1].slot + 1)
            codec_state.reset(slots)
            if schedule is prompt.Schedule.UPSTREAM:
                codec_state.decoder.copy_rows(slots, primed.decoder, slice(0, 1))
        if not live:
            continue
        t_of = [tick - specs[i][1] for i in live]
        rows = codec_state.head(len(live))
        encoded = codec.encode_step(torch.stack([specs[i][0].audio[t] for i, t in zip(live, t_of)]), rows)
        user = encoded
        if force_user is not None:
            user = torch.tensor([force_user[i][t] for i, t in zip(live, t_of)])
        B = len(live)
        pos = state.pos[:B].clone()
        draw = step.sampled_draws(sample, state.key[:B], pos + 1, temp.cfg.text_card, temp.cfg.card)
        if force is not None:
            forced = torch.tensor([force[i][t] if force[i] is not None else [-1] * 9 for i, t in zip(live, t_of)])
            draw = forcing(draw, forced)
        fed = step.fed_column(state, user, schedule)
        out = step.live_step(temp, dep, pool, state, user, schedule, draw)
        pcm = codec.decode_step(out.emitted[:, 1:], rows)
        for row, i in enumerate(live):
            r = runs[i]
            r.emitted.append(out.emitted[row].tolist())
            r.fed.append(fed[row].tolist())
            r.drawn.append(state.ahead[row].tolist())
            r.text_logits.append(out.text_logits[row])
            r.audio_logits.append(out.audio_logits[row])
            r.encoded.append(encoded[row].tolist())
            r.pcm.append(pcm[row])
    return runs


def forcing(draw: step.Draw, forced: torch.Tensor) -> step.Draw:
    """`draw` with the tokens of `forced` [B, 9] (text, agent cb0..7; -1 = draw) put in instead."""
    def forced_draw(logits: torch.Tensor, stream: int) -> torch.Tensor:
        got = draw(logits, stream)
        return torch.where(forced[:, stream] >= 0, forced[:, stream], got)
    return forced_draw


def reference_run(upstream_lm, upstream_mimi, spec: Spec, frames: int) -> reference_step.Record:
    """The test reference, greedy, over the prompt and `frames` live calls on the caller's audio."""
    ref = reference_step.Reference(upstream_lm, spec.voice, spec.cache, upstream_mimi)
    try:
        ref.prompt(spec.role_ids)
        for t in range(frames):
            ref.hear(spec.audio[t])
        return ref.rec
    finally:
        ref.close()


def top2_margin(logits: torch.Tensor) -> float:
    top = torch.topk(logits.float(), 2).values
    return float(top[0] - top[1])


def draw_margins(rec: reference_step.Record) -> list[float]:
    """The top-2 logit margin of every greedy draw the reference made: text, then agent cb0..7."""
    return [top2_margin(rec.text_logits[t]) for t in range(len(rec.draws))] + [
        top2_margin(rec.audio_logits[t][s]) for t in range(len(rec.draws)) for s in range(8)]
