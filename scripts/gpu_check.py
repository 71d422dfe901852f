"""GPU check of the PersonaPlex engine's real tick (spec personaplex §6.12, issue 5): memory per
session next to the floor, bandwidth, prefill per newcomer and whole-tick time per batch size.

    python scripts/gpu_check.py --out gpu-check.json                              # H200: full size, bf16
    python scripts/gpu_check.py --config tiny --device cpu --out x.json           # CPU smoke test

Needs no checkpoint: speed does not depend on the weights' values, so it builds seeded random LM
weights (8 resident depformer steps, in the LM dtype) and a seeded random Mimi (fp32; the real
codec for `personaplex-7b`, the tiny one otherwise). The tick is the engine's own:
`engine_pod.program.Pools` (one row per slot, allocated once) and `Program.run(bucket)` (Mimi
encode, live step, Mimi decode, int16), captured as **one CUDA graph per bucket** on CUDA (eager
on CPU), with the engine's host side around it (caller PCM in, ids, PCM and finite flags out: the
one sync per tick). Newcomers are prefilled as the engine does: slot reset, primed decoder, one
ragged `prefill.admit`. Stages, the JSON rewritten after each, so a failure late still leaves the
earlier numbers:

1. environment: device, torch and CUDA versions, dtype, schedule, attention backend, graphs;
2. memory: weights; per slot measured from the pool allocation (KV ring, Mimi state, token state,
   caller PCM) next to spec §5.12 (1.48 GiB), KV bytes per frame per session next to 512 KiB,
   free memory after load, the derived `max_sessions` (8 GiB reserve);
3. bandwidth: a device-to-device copy (4 GiB on CUDA), for the floor;
4. prefill of one newcomer alone (p50 of 5);
5. per batch size B (default 1, 8, 32, 64, capped by the derived maximum): the bucket's graph
   capture (s), B newcomers prefilled in one forward (ms, ms per newcomer, rows), then warm-up and
   measured ticks, for young sessions and at full context (every ring slot valid, the KV filled
   with random values: the traffic of a long session). p50/p99 from CUDA events around the
   program (device) and from the wall clock around the whole tick (host). Each level reports the
   floor of spec §5.13, W + sum of KV read, with W for 8 and for 16 depformer steps (16.1 GB for
   the real model), and the ratio; every logit and PCM sample must be finite;
6. sanity: graph replay against eager at B = 4 for 10 greedy ticks, tokens identical; graph pool
   bytes after all captures.

Not covered: the `flex` attention backend (the engine has only `masked`, which reads the whole KV
ring of every row: at young positions the KV term of the floor understates what it reads).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import platform
import sys
import time
from collections.abc import Callable

import torch

from liveplex.bench import percentiles
from liveplex.engine_pod import program
from liveplex.personaplex import (
    checkpoint,
    config,
    mimi,
    prefill,
    prompt,
    sampling,
)

RESERVE_BYTES = 8 * 2 ** 30
"""Kept free for activations, graphs and the allocator (spec §5.1 `memory_reserve_gib`)."""
SCHEDULE = prompt.Schedule.UPSTREAM
SANITY_BATCH = 4
"""Graph replay against eager is checked at this batch size (spec §6.12 item 7)."""
SANITY_TICKS = 10
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


class _Bench:
    """The engine's device side for one run: pools for the largest level, programs, one prompt."""

    def __init__(self, lm: checkpoint.LM, codec: mimi.Mimi, slots: int, graphs: bool,
                 device: torch.device) -> None:
        cfg = lm.temporal.cfg
        gen = torch.Generator().manual_seed(0)
        voice_frames = min(50, cfg.context // 4)
        role = min(26, cfg.context - voice_frames - 15)
        voice = torch.randn(voice_frames, cfg.dim, generator=gen).to(device, lm.temporal.text_linear.weight.dtype)
        sil = prompt.silence_column()
        p = prompt.layout(voice, sil, sil, torch.randint(4, 400, (role,), generator=gen).tolist(), SCHEDULE)
        self.prompt = dataclasses.replace(p, columns=p.columns.to(device))
        self.prefix = prefill.voice_prefix(lm.temporal, voice)
        self.lm, self.codec, self.device = lm, codec, device
        self.sync = _sync(device)
        allocated = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        self.pools = program.Pools(lm, codec, slots)
        self.pool_bytes = (torch.cuda.memory_allocated(device) - allocated) if device.type == "cuda" else None
        self.primed = prefill.primed_codec_state(codec)
        self.sampled = program.Program(lm, codec, self.pools, SCHEDULE, sampling.Sampling(), graphs)
        self.caller = (torch.rand(slots, codec.cfg.frame_samples, generator=gen) - 0.5).numpy()

    def admit(self, slots: list[int], greedy: bool = False) -> float:
        """Prefill newcomers into `slots` as the engine does; returns ms (synchronised)."""
        self.sync()
        t0 = time.perf_counter()
        self.pools.codec.reset(slots)
        self.pools.codec.decoder.copy_rows(slots, self.primed.decoder, [0] * len(slots))
        newcomers = [prefill.Newcomer(s, self.prompt, self.prefix, seed=s) for s in slots]
        prefill.admit(self.lm.temporal, self.lm.depformer, self.pools.kv, self.pools.tokens, newcomers, SCHEDULE,
                      sampling.Sampling(greedy=greedy))
        self.sync()
        return (time.perf_counter() - t0) * 1e3

    def tick(self, prog: program.Program, batch: int) -> tuple[list[list[int]], bool, float | None]:
        """One engine tick: caller PCM in, `prog.run(batch)`, ids, PCM and finite flags out.

        Returns the emitted ids, whether every row was finite, and the program's device ms (CUDA).
        """
        events = None
        if self.device.type == "cuda":
            events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.pools.pcm_in[:batch].copy_(torch.from_numpy(self.caller[:batch]))
        if events:
            events[0].record()
        out = prog.run(batch)
        if events:
            events[1].record()
        emitted = out.emitted[:batch].cpu().tolist()  # the tick's one host sync, as in the engine
        out.pcm[:batch].cpu().numpy()
        finite = all(out.finite[:batch].cpu().tolist())
        return emitted, finite, events[0].elapsed_time(events[1]) if events else None


def _level(bench: _Bench, batch: int, full: bool, args: argparse.Namespace,
           floor: dict[str, float]) -> dict[str, object]:
    cfg = bench.lm.temporal.cfg
    pools = bench.pools
    t0 = time.perf_counter()
    bench.sampled.capture([batch])  # no-op on CPU and for an already captured bucket
    capture_s = time.perf_counter() - t0
    pools.clear_all()  # capture ran the bucket's rows
    prefill_ms = bench.admit(list(range(batch)))
    if full:
        for t in pools.kv.k + pools.kv.v:
            t.normal_()
        pools.tokens.pos[:batch] = cfg.context  # wrapped: every ring slot valid
    first_pos = int(pools.tokens.pos[0])
    wall, device_ms, finite = [], [], True
    for i in range(args.warmup + args.ticks):
        t0 = time.perf_counter()
        _, ok, dev = bench.tick(bench.sampled, batch)
        elapsed = (time.perf_counter() - t0) * 1e3
        finite = finite and ok
        if i >= args.warmup:
            wall.append(elapsed)
            if dev is not None:
                device_ms.append(dev)
    mean_pos = (first_pos + int(pools.tokens.pos[0])) / 2
    kv_bytes = batch * min(mean_pos + 1, cfg.context) * floor["kv_bytes_per_frame"]
    floor_ms = {f"floor_{name}_ms": (w + kv_bytes) / floor["bytes_per_s"] * 1e3
                for name, w in (("8_steps", floor["weights_8_steps"]), ("16_steps", floor["weights_16_steps"]))}
    rows = batch * bench.prompt.columns.shape[0]
    row: dict[str, object] = {
        "batch": batch, "full_context": full, "mean_position": mean_pos, "capture_s": capture_s,
        "prefill_ms": prefill_ms, "prefill_rows": rows, "prefill_ms_per_newcomer": prefill_ms / batch,
        "prefill_ms_per_row": prefill_ms / rows, "wall": _summary(wall), "finite": finite, **floor_ms}
    if device_ms:
        row["device"] = _summary(device_ms)
    measured = row["device"]["p50_ms"] if device_ms else row["wall"]["p50_ms"]  # type: ignore[index]
    row["p50_over_floor_8_steps"] = measured / floor_ms["floor_8_steps_ms"]
    row["p50_over_floor_16_steps"] = measured / floor_ms["floor_16_steps_ms"]
    return row


def _replay_matches_eager(bench: _Bench, graphs: bool) -> dict[str, object]:
    """The same newcomers, greedy, for `SANITY_TICKS` ticks: eagerly, then through the graph."""
    batch = min(SANITY_BATCH, bench.pools.slots)
    runs = []
    for use_graphs in (False, graphs):
        prog = program.Program(bench.lm, bench.codec, bench.pools, SCHEDULE, sampling.Sampling(greedy=True),
                               use_graphs)
        prog.capture([batch])
        bench.pools.clear_all()
        bench.admit(list(range(batch)), greedy=True)
        runs.append([bench.tick(prog, batch)[0] for _ in range(SANITY_TICKS)])
    return {"batch": batch, "ticks": SANITY_TICKS, "graphs": graphs, "tokens_identical": runs[0] == runs[1]}


@torch.inference_mode()
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(config.CONFIGS), default="personaplex-7b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default=None, help="LM dtype (Mimi is fp32)")
    parser.add_argument("--batch", default="1,8,32,64")
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--no-cuda-graphs", action="store_true", help="run the ticks eagerly on CUDA")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (host work; the CPU smoke test)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("gpu-check.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    graphs = device.type == "cuda" and not args.no_cuda_graphs
    cfg = config.CONFIGS[args.config]()
    mimi_cfg = mimi.mimi_config() if args.config == "personaplex-7b" else mimi.tiny_config()
    levels = sorted({int(x) for x in args.batch.split(",")})
    report: dict[str, object] = {
        "config": args.config, "device": str(device), "dtype": str(dtype), "mimi_dtype": "torch.float32",
        "torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(), "attention": "masked",
        "cuda_graphs": graphs, "schedule": SCHEDULE.value, "command": " ".join(sys.argv), "levels": []}
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
    floor = {"weights_8_steps": _weights_read_bytes(cfg, config.AGENT_CODEBOOKS, element),
             "weights_16_steps": _weights_read_bytes(cfg, cfg.dep_steps, element),
             "kv_bytes_per_frame": cfg.num_layers * 2 * cfg.dim * element}
    report.update({
        "build_s": time.perf_counter() - t0,
        "weights_bytes": sum(p.numel() * p.element_size() for m in (lm.temporal, lm.depformer) for p in m.parameters()),
        "mimi_weights_bytes": sum(t.numel() * t.element_size() for t in codec.state_dict().values()),
        "kv_bytes_per_slot": kv_slot, "mimi_state_bytes_per_slot": codec.init_state(1).nbytes,
        "kv_bytes_per_frame": floor["kv_bytes_per_frame"], "spec_kv_bytes_per_frame": 512 * 1024,
        "spec_bytes_per_slot": 1_572_864_000 + 16_500_000 if args.config == "personaplex-7b" else None,
        "floor_inputs": floor})
    slots = levels[-1]
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the fp32 weights just cast to bf16 are cached, not free
        free, _ = torch.cuda.mem_get_info(device)
        per_slot_estimate = kv_slot + codec.init_state(1).nbytes
        report["free_after_load_bytes"] = free
        report["derived_max_sessions"] = int((free - RESERVE_BYTES) // per_slot_estimate)
        slots = min(slots, report["derived_max_sessions"])  # type: ignore[call-overload]
    save()
    try:
        report["bandwidth"] = _bandwidth(device)
    except Exception as e:  # noqa: BLE001  (keep going: the floor is then missing, the tick times are not)
        report["bandwidth"] = {"error": repr(e)}
    floor["bytes_per_s"] = report["bandwidth"].get("bytes_per_s", float("nan"))  # type: ignore[union-attr]
    save()
    bench = _Bench(lm, codec, slots, graphs, device)
    report.update({"slots": slots, "bytes_per_slot": bench.pools.slot_bytes, "pool_bytes_measured": bench.pool_bytes,
                   "bytes_per_slot_measured": bench.pool_bytes / slots if bench.pool_bytes else None,
                   "prompt_rows": bench.prompt.columns.shape[0], "voice_frames": bench.prompt.voice.shape[0]})
    report["prefill_one_newcomer_ms"] = sorted(bench.admit([0]) for _ in range(5))[2]
    save()
    reserved = torch.cuda.memory_reserved(device) if device.type == "cuda" else 0
    for b in levels:
        if b > slots:
            report["levels"].append({"batch": b, "skipped": "above the derived max_sessions"})  # type: ignore[union-attr]
            save()
            break
        for full in (False, True):
            try:
                row = _level(bench, b, full, args, floor)
            except Exception as e:  # noqa: BLE001  (keep what we have; the report says what failed)
                row = {"batch": b, "full_context": full, "error": repr(e)}
            report["levels"].append(row)  # type: ignore[union-attr]
            save()
            print(json.dumps(row), flush=True)
    if device.type == "cuda":
        report["graph_and_workspace_bytes"] = torch.cuda.memory_reserved(device) - reserved
    try:
        report["replay_vs_eager"] = _replay_matches_eager(bench, graphs)
    except Exception as e:  # noqa: BLE001
        report["replay_vs_eager"] = {"error": repr(e)}
    report["total_s"] = time.perf_counter() - t0
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
