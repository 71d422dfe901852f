"""GPU check of the PersonaPlex LM step (spec personaplex §6.12): memory and tick time per batch.

    python scripts/gpu_check.py --out gpu-check.json                  # H200: full size, bf16
    python scripts/gpu_check.py --config tiny --device cpu --out x.json   # CPU smoke test

Needs no checkpoint: speed does not depend on the weights' values, so it builds seeded random
weights (8 depformer steps). For each batch size it admits B sessions through the real prefill
(a 50-frame voice and a 26-token prompt), times warm-up then measured eager live ticks with CUDA
events and wall clock, for young sessions and at full context (positions moved to context - 100,
the KV filled with random values). The JSON is rewritten after every stage, so a failure late
still leaves the earlier numbers. Not covered yet: CUDA graphs, the flex backend, Mimi.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import torch

from liveplex.personaplex import checkpoint, config, prefill, prompt, sampling, step


def _ms_percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]  # noqa: E731
    return {"p50_ms": pick(0.5), "p99_ms": pick(0.99)}


@torch.no_grad()
def _level(lm: checkpoint.LM, cfg: config.LMConfig, batch: int, full: bool, args: argparse.Namespace,
           device: torch.device) -> dict[str, object]:
    temp, dep = lm.temporal, lm.depformer
    gen = torch.Generator().manual_seed(batch)
    voice_frames = min(50, cfg.context // 4)
    role = min(26, cfg.context - voice_frames - 15)
    voice = torch.randn(voice_frames, cfg.dim, generator=gen).to(device)
    sil = prompt.silence_column()
    p = prompt.layout(voice, sil, sil, torch.randint(4, 400, (role,), generator=gen).tolist(), prompt.Schedule.UPSTREAM)
    p = prompt.Prompt(p.voice, p.columns.to(device), p.role_tokens)
    pool = temp.new_pool(batch)
    state = step.TokenState.allocate(batch, device)
    prefix = prefill.voice_prefix(temp, voice)
    sample = sampling.Sampling()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    prefill.admit(temp, dep, pool, state, [prefill.Newcomer(i, p, prefix, seed=i) for i in range(batch)],
                  prompt.Schedule.UPSTREAM, sample)
    sync()
    prefill_ms = (time.perf_counter() - t0) * 1e3
    if full:
        for t in pool.k + pool.v:
            t.normal_()
        state.pos[:batch] = cfg.context - 100
    wall, device_ms = [], []
    for i in range(args.warmup + args.ticks):
        user = torch.randint(0, cfg.card, (batch, config.AGENT_CODEBOOKS), device=device)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        out = step.live_step(temp, dep, pool, state, user, prompt.Schedule.UPSTREAM, sample)
        out.emitted.cpu()  # the engine's one sync per tick
        elapsed = (time.perf_counter() - t0) * 1e3
        if i >= args.warmup:
            wall.append(elapsed)
            if device.type == "cuda":
                end.record()
                end.synchronize()
                device_ms.append(start.elapsed_time(end))
    finite = bool(torch.isfinite(out.text_logits).all()) and bool(torch.isfinite(out.audio_logits).all())
    row: dict[str, object] = {"batch": batch, "full_context": full, "prefill_ms": prefill_ms,
                              "prefill_rows": batch * p.columns.shape[0], "wall": _ms_percentiles(wall),
                              "finite": finite}
    if device_ms:
        row["device"] = _ms_percentiles(device_ms)
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(config.CONFIGS), default="personaplex-7b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default=None)
    parser.add_argument("--batch", default="1,2,4,8,16,32,48,64")
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("gpu-check.json"))
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    cfg = config.CONFIGS[args.config]()
    report: dict[str, object] = {"config": args.config, "device": str(device), "dtype": str(dtype),
                                 "torch": torch.__version__, "cuda": torch.version.cuda, "attention": "masked",
                                 "schedule": "upstream", "levels": []}
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
        report["gpu_memory_bytes"] = torch.cuda.get_device_properties(device).total_memory

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=2))

    save()
    t0 = time.perf_counter()
    lm = checkpoint.random_lm(cfg, seed=0, device=device)
    lm.temporal.to(dtype)
    lm.depformer.to(dtype)
    report["weights_bytes"] = sum(p.numel() * p.element_size()
                                  for m in (lm.temporal, lm.depformer) for p in m.parameters())
    report["kv_bytes_per_slot"] = lm.temporal.new_pool(1).nbytes_per_slot
    report["build_s"] = time.perf_counter() - t0
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        report["free_after_load_bytes"] = free
        report["derived_max_sessions"] = int((free - 8 * 2 ** 30) // report["kv_bytes_per_slot"])
    save()
    for b in (int(x) for x in args.batch.split(",")):
        if "derived_max_sessions" in report and b > report["derived_max_sessions"]:
            break
        for full in (False, True):
            try:
                report["levels"].append(_level(lm, cfg, b, full, args, device))
            except Exception as e:  # keep what we have; the report says what failed
                report["levels"].append({"batch": b, "full_context": full, "error": repr(e)})
            save()
            print(json.dumps(report["levels"][-1]), flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
