"""`liveplex bench kv-fidelity`'s measurement (`liveplex.bench.kv_fidelity` parses the flags, then
imports this: torch and the model). See that module for what is compared, and how.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
import tempfile

import torch
import torch.nn.functional as F

from liveplex.engine_pod import model as model_mod
from liveplex.personaplex import config, kv8, prefill, prompt, ring, sampling, step, tiny_checkpoint

TEXT_COSINE_MEDIAN, AUDIO_COSINE_MEDIAN, EVERY_FRAME_COSINE = 0.998, 0.995, 0.99
"""Issue 36's bar: at the median frame, and at every frame."""
SCHEDULE = prompt.Schedule.UPSTREAM
GREEDY = sampling.Sampling(greedy=True)


@dataclasses.dataclass(slots=True)
class _Lane:
    """One run: its ring, token state and the voice prefixes in its ring's dtype."""

    pool: ring.KVPool
    state: step.TokenState
    offsets: ring.Offsets


def _sessions(model: model_mod.Model) -> list[tuple[prompt.Prompt, torch.Tensor]]:
    """Three sessions' prompts and voice embeddings (Moshi: the bare prompt, three times)."""
    if model.convention is prompt.Convention.MOSHI:
        bare = prompt.bare(model.cfg.init_column, model.cfg.dim)
        return [(bare, bare.voice)] * 3
    out = []
    for name, role in zip(sorted(model.voices) * 2, ("Hi.", "Be brief.", "You are a teacher.")):
        v = model.voices[name]
        layout = prompt.layout(v.embeddings, v.ring_n, v.ring_next, model.tokenizer.role_ids(role), SCHEDULE)
        out.append((layout, v.embeddings))
    return out[:3]


def _recording(record: dict[int, torch.Tensor]) -> step.Draw:
    def draw(logits: torch.Tensor, stream: int) -> torch.Tensor:
        record[stream] = sampling.draw(logits, greedy=True, temperature=1.0, top_k=1, race=None)
        return record[stream]
    return draw


def _forced(record: dict[int, torch.Tensor]) -> step.Draw:
    return lambda logits, stream: record[stream]


@torch.no_grad()
def run(model: model_mod.Model, frames: int, late: int, seed: int) -> dict[str, object]:
    """Both runs of three sessions (joining at ticks 0, 0 and `late`), `frames` frames each."""
    temp, dep, cfg = model.lm.temporal, model.lm.depformer, model.cfg
    sessions = _sessions(model)
    joins = (0, 0, late)
    lanes = []
    for dtype in (None, kv8.FP8):
        pool = temp.new_pool(3, dtype)
        prefixes = [prefill.voice_prefix(temp, voice, dtype) for _, voice in sessions]
        lanes.append((_Lane(pool, step.TokenState.allocate(3), ring.Offsets.of(pool)), prefixes))
    gen = torch.Generator().manual_seed(seed)
    user = torch.randint(0, cfg.card, (3, frames, config.AGENT_CODEBOOKS), generator=gen)
    text_cos: list[float] = []
    audio_cos: list[float] = []
    agree = torch.zeros(1 + config.AGENT_CODEBOOKS)
    live = 0
    for tick in range(late + frames):
        joining = [i for i, at in enumerate(joins) if at == tick]
        if joining:
            for lane, prefixes in lanes:
                newcomers = [prefill.Newcomer(i, sessions[i][0], prefixes[i], seed + i) for i in joining]
                prefill.admit(temp, dep, lane.pool, lane.state, newcomers, SCHEDULE, GREEDY)
            rows = slice(joining[0], joining[-1] + 1)
            lanes[1][0].state.copy_rows(rows, lanes[0][0].state, rows)  # the admission draw, forced
            live = joining[-1] + 1
        running = [i for i in range(live) if tick - joins[i] < frames]
        if not running:
            continue
        B = live
        codes = torch.stack([user[i, min(tick - joins[i], frames - 1)] for i in range(B)])
        record: dict[int, torch.Tensor] = {}
        outs = []
        for (lane, _), draw in zip(lanes, (_recording(record), _forced(record)), strict=True):
            pos = lane.state.pos[:B]
            plan = ring.live_plan(pos, lane.pool, lane.offsets, ring.Backend.MASKED, cfg.context)
            outs.append(step.live_step(temp, dep, lane.pool, lane.state, codes, SCHEDULE, draw, plan))
        full, eight = outs
        for i in running:
            text_cos.append(float(F.cosine_similarity(full.text_logits[i], eight.text_logits[i], dim=0)))
            audio_cos.append(float(F.cosine_similarity(full.audio_logits[i].flatten(), eight.audio_logits[i].flatten(),
                                                       dim=0)))
            agree[0] += float(full.text_logits[i].argmax() == eight.text_logits[i].argmax())
            agree[1:] += (full.audio_logits[i].argmax(-1) == eight.audio_logits[i].argmax(-1)).float()
    n = len(text_cos)
    report = {
        "frames_compared": n, "text_cosine_median": statistics.median(text_cos), "text_cosine_min": min(text_cos),
        "audio_cosine_median": statistics.median(audio_cos), "audio_cosine_min": min(audio_cos),
        "greedy_agreement": {name: round(float(a) / n, 4)
                             for name, a in zip(["text"] + [f"cb{k}" for k in range(config.AGENT_CODEBOOKS)], agree)},
    }
    report["meets_bar"] = (report["text_cosine_median"] >= TEXT_COSINE_MEDIAN
                           and report["audio_cosine_median"] >= AUDIO_COSINE_MEDIAN
                           and min(report["text_cosine_min"], report["audio_cosine_min"]) >= EVERY_FRAME_COSINE)
    return report


def tiny(convention: prompt.Convention, directory: pathlib.Path, seed: int) -> model_mod.Model:
    """The tiny checkpoint of `convention`, written to `directory` and loaded (CPU, fp32)."""
    tiny_checkpoint.make_tiny(directory, seed, convention)
    return model_mod.load(directory, device="cpu", dtype="fp32", context_frames=config.tiny().context,
                          max_voice_frames=250)


def measure(frames: int, late: int, seed: int) -> dict[str, object]:
    """Both tiny models' reports."""
    out: dict[str, object] = {"frames": frames, "late": late, "seed": seed, "context": config.tiny().context,
                              "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        for convention in prompt.Convention:
            model = tiny(convention, pathlib.Path(tmp) / convention.value, seed)
            out[convention.value] = run(model, frames, late, seed)
    return out
