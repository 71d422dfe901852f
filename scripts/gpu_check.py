"""GPU check of the PersonaPlex engine tick (spec personaplex §6.12, issue 5): memory, bandwidth,
prefill and whole-tick time per batch size.

    python scripts/gpu_check.py --out gpu-check.json                              # H200: full size, bf16
    python scripts/gpu_check.py --config tiny --device cpu --out x.json           # CPU smoke test

Needs no checkpoint: speed does not depend on the weights' values, so it builds seeded random LM
weights (8 resident depformer steps, in the LM dtype) and a seeded random Mimi (fp32; the real
codec for `personaplex-7b`, the tiny one otherwise). Stages, the JSON rewritten after each, so a
failure late still leaves the earlier numbers:

1. environment: device, torch and CUDA versions, dtype, schedule, attention backend;
2. memory: weights, bytes per slot measured from the allocations (KV ring + Mimi state) next to
   spec §5.12, free memory after load, the derived `max_sessions` (8 GiB reserve);
3. bandwidth: a device-to-device copy (4 GiB on CUDA), for the floor;
4. per batch size B (capped by the derived maximum): B newcomers prefilled in one ragged forward
   (ms, ms per row), then warm-up and measured **whole ticks**: Mimi encode of B caller frames,
   the LM live step (temporal, text draw, 8 depformer steps, sampled), Mimi decode, int16 PCM,
   and the host copy of ids and PCM (the engine's one sync per tick). Timed with CUDA events
   (device) and the wall clock (host), for young sessions and at full context (every ring slot
   valid, the KV filled with random values: the traffic of a long session). Each level reports
   the memory-traffic floor of spec §5.13 with W for 8 and for 16 depformer steps, and the ratio;
5. sanity per level: every logit and PCM sample finite.

Not covered here (they belong to the engine, `liveplex/engine_pod/`): CUDA graphs and the `flex`
attention backend. This runs eager with the `masked` backend, so on a GPU its ticks read the whole
KV ring of every row and carry the launch overhead of ~1000 kernels: an upper bound on the tick.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time
from collections.abc import Callable

import torch

from liveplex.bench import percentiles
from liveplex.personaplex import (
    checkpoint,
    config,
    mimi,
    prefill,
    prompt,
    sampling,
    step,
)

RESERVE_BYTES = 8 * 2 ** 30
"""Kept free for activations and the allocator (spec §5.1 `memory_reserve_gib`)."""
SCHEDULE = prompt.Schedule.UPSTREAM
_GATHERED = ("emb.", "text_emb.", "depformer_text_emb.", "depformer_emb.")  # embeddings: rows gathered, not read


def _weights_read_bytes(cfg: config.LMConfig, steps: int, element: int) -> int:
    """Bytes of weights one tick reads with `steps` depformer steps (embedding tables excluded)."""
    table = checkpoint.expected_lm(cfg, steps)
    return element * sum(torch.Size(s).numel() for k, s in table.items() if not k.startswith(_GATHERED))


def _summary(samples_ms: list[float]) -> dict[str, float]:
    s = percentiles.summarize([round(ms * 1000) for ms in samples_ms])
    return {"p50_ms": s.p50, "p99_ms": s.p99, "mean_ms": s.mean}


def _sync(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _bandwidth(device: torch.device) -> dict[str, float]:
    """Device-to-device copy: bytes read plus written per second."""
    nbytes = 4 * 2 ** 30 if device.type == "cuda" else 256 * 2 ** 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    sync = _sync(device)
    dst.copy_(src)
    sync()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        dst.copy_(src)
        sync()
        times.append(time.perf_counter() - t0)
    return {"copy_bytes": nbytes, "bytes_per_s": 2 * nbytes / min(times)}


def _level(lm: checkpoint.LM, codec: mimi.Mimi, batch: int, full: bool, args: argparse.Namespace,
           device: torch.device, floor: dict[str, float]) -> dict[str, object]:
    temp, dep, cfg = lm.temporal, lm.depformer, lm.temporal.cfg
    gen = torch.Generator().manual_seed(batch)
    voice_frames = min(50, cfg.context // 4)
    role = min(26, cfg.context - voice_frames - 15)
    voice = torch.randn(voice_frames, cfg.dim, generator=gen).to(device)
    sil = prompt.silence_column()
    p = prompt.layout(voice, sil, sil, torch.randint(4, 400, (role,), generator=gen).tolist(), SCHEDULE)
    p = prompt.Prompt(p.voice, p.columns.to(device), p.role_tokens)
    pool, state = temp.new_pool(batch), step.TokenState.allocate(batch, device)
    rows = codec.init_state(batch)
    primed = prefill.primed_codec_state(codec)
    rows.decoder.copy_rows(list(range(batch)), primed.decoder, [0] * batch)
    prefix = prefill.voice_prefix(temp, voice)
    sample = sampling.Sampling()
    sync = _sync(device)
    sync()
    t0 = time.perf_counter()
    newcomers = [prefill.Newcomer(i, p, prefix, seed=i) for i in range(batch)]
    prefill.admit(temp, dep, pool, state, newcomers, SCHEDULE, sample)
    sync()
    prefill_ms = (time.perf_counter() - t0) * 1e3
    prefill_rows = batch * p.columns.shape[0]
    if full:
        for t in pool.k + pool.v:
            t.normal_()
        state.pos[:batch] = cfg.context  # wrapped: every ring slot valid
    pcm_in = (torch.rand(batch, codec.cfg.frame_samples, generator=gen) - 0.5).to(device)
    wall, device_ms, finite = [], [], True
    first_pos = int(state.pos[0])
    for i in range(args.warmup + args.ticks):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        out = step.live_step(temp, dep, pool, state, codec.encode_step(pcm_in, rows), SCHEDULE, sample)
        pcm = codec.decode_step(out.emitted[:, 1:], rows)
        pcm16 = (pcm.clamp(-1, 1) * 32767).round().to(torch.int16)
        out.emitted.cpu(), pcm16.cpu()  # the engine's one sync per tick
        elapsed = (time.perf_counter() - t0) * 1e3
        if i >= args.warmup:
            wall.append(elapsed)
            if device.type == "cuda":
                end.record()
                end.synchronize()
                device_ms.append(start.elapsed_time(end))
        finite = finite and bool(torch.isfinite(out.text_logits).all() and torch.isfinite(out.audio_logits).all()
                                 and torch.isfinite(pcm).all())
    mean_pos = (first_pos + int(state.pos[0])) / 2
    kv_bytes = batch * min(mean_pos + 1, cfg.context) * floor["kv_bytes_per_frame"]
    floor_ms = {f"floor_{name}_ms": (w + kv_bytes) / floor["bytes_per_s"] * 1e3
                for name, w in (("8_steps", floor["weights_8_steps"]), ("16_steps", floor["weights_16_steps"]))}
    row: dict[str, object] = {
        "batch": batch, "full_context": full, "mean_position": mean_pos, "prefill_ms": prefill_ms,
        "prefill_rows": prefill_rows, "prefill_ms_per_row": prefill_ms / prefill_rows,
        "wall": _summary(wall), "finite": finite, **floor_ms}
    if device_ms:
        row["device"] = _summary(device_ms)
    measured = row["device"]["p50_ms"] if device_ms else row["wall"]["p50_ms"]  # type: ignore[index]
    row["p50_over_floor_8_steps"] = measured / floor_ms["floor_8_steps_ms"]
    return row


@torch.inference_mode()
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(config.CONFIGS), default="personaplex-7b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default=None, help="LM dtype (Mimi is fp32)")
    parser.add_argument("--batch", default="1,2,4,8,16,32,48,64")
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (host work; the CPU smoke test)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("gpu-check.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    cfg = config.CONFIGS[args.config]()
    mimi_cfg = mimi.mimi_config() if args.config == "personaplex-7b" else mimi.tiny_config()
    report: dict[str, object] = {
        "config": args.config, "device": str(device), "dtype": str(dtype), "mimi_dtype": "torch.float32",
        "torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(), "attention": "masked",
        "cuda_graphs": False, "schedule": SCHEDULE.value, "command": " ".join(sys.argv), "levels": []}
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
    codec = mimi.random_mimi(mimi_cfg, seed=0, device=device)
    element = torch.empty((), dtype=dtype).element_size()
    kv_slot = lm.temporal.new_pool(1).nbytes_per_slot
    mimi_slot = codec.init_state(1).nbytes
    report.update({
        "build_s": time.perf_counter() - t0,
        "weights_bytes": sum(p.numel() * p.element_size() for m in (lm.temporal, lm.depformer) for p in m.parameters()),
        "mimi_weights_bytes": sum(t.numel() * t.element_size() for t in codec.state_dict().values()),
        "kv_bytes_per_slot": kv_slot, "mimi_state_bytes_per_slot": mimi_slot, "bytes_per_slot": kv_slot + mimi_slot,
        "spec_bytes_per_slot": 1_572_864_000 + 16_500_000 if args.config == "personaplex-7b" else None})
    floor = {"weights_8_steps": _weights_read_bytes(cfg, config.AGENT_CODEBOOKS, element),
             "weights_16_steps": _weights_read_bytes(cfg, cfg.dep_steps, element),
             "kv_bytes_per_frame": cfg.num_layers * 2 * cfg.dim * element}
    report["floor_inputs"] = floor
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        report["free_after_load_bytes"] = free
        report["derived_max_sessions"] = int((free - RESERVE_BYTES) // report["bytes_per_slot"])  # type: ignore[operator]
    save()
    try:
        report["bandwidth"] = _bandwidth(device)
    except Exception as e:  # noqa: BLE001  (keep going: the floor is then missing, the tick times are not)
        report["bandwidth"] = {"error": repr(e)}
    floor["bytes_per_s"] = report["bandwidth"].get("bytes_per_s", float("nan"))  # type: ignore[union-attr]
    save()
    for b in (int(x) for x in args.batch.split(",")):
        if "derived_max_sessions" in report and b > report["derived_max_sessions"]:  # type: ignore[operator]
            report["levels"].append({"batch": b, "skipped": "above the derived max_sessions"})  # type: ignore[union-attr]
            save()
            break
        for full in (False, True):
            try:
                row = _level(lm, codec, b, full, args, device, floor)
            except Exception as e:  # noqa: BLE001  (keep what we have; the report says what failed)
                row = {"batch": b, "full_context": full, "error": repr(e)}
            report["levels"].append(row)  # type: ignore[union-attr]
            save()
            print(json.dumps(row), flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    report["total_s"] = time.perf_counter() - t0
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
