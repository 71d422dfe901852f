"""GPU check of the PersonaPlex engine's real tick (spec personaplex §6.12, issues 5 and 14): memory
per session next to the floor, bandwidth, prefill, whole-tick time per batch size, kernels per tick.

    python scripts/gpu_check.py --out gpu-check.json                              # H200: full size, bf16
    python scripts/gpu_check.py --config tiny --device cpu --out x.json           # CPU smoke test

Needs no checkpoint: speed does not depend on the weights' values, so it builds seeded random LM
weights (8 resident depformer steps, in the LM dtype) and a seeded random Mimi (fp32; the real
codec for `personaplex-7b`, the tiny one otherwise). The tick is the engine's own:
`engine_pod.program.Pools` (one row per slot, allocated once) and `Program.run(bucket)` (Mimi
encode, live step, Mimi decode, packing), with the engine's host side around it (caller PCM up
through a pinned staging buffer, one packed output down: the one sync per tick), under the
engine's attention backend (`flash` on CUDA; `--attention masked` for the fallback). Every
level's bucket is captured at the start, **largest first, into one pool, as the engine does**; a
bucket whose capture fails runs eagerly and the report says why. Newcomers are prefilled as the
engine does: slot reset, primed decoder, one ragged `prefill.admit` through a staging buffer.
Stages, the JSON rewritten after each, so a failure late still leaves the earlier numbers:

1. environment: device, torch and CUDA versions, dtype, schedule, attention backend, graphs;
2. memory: weights; per slot measured from the pool allocation (KV ring, Mimi state, token state,
   caller PCM) next to spec §5.12 (1.48 GiB), KV bytes per frame per session next to 512 KiB,
   free memory after load, the derived `max_sessions` (8 GiB reserve);
3. bandwidth: a device-to-device copy (4 GiB on CUDA), for the floor;
4. graphs: every bucket captured (s each, largest first), the device memory the graphs and their
   pool took (free memory before and after, `mem_get_info`: what the allocator's own
   `empty_cache` cannot hide), failures;
5. prefill of one newcomer alone (p50 of 5), and of a burst of 8 and 26 in one call;
6. per batch size B (default 1, 8, 16, 32, 64, capped by the derived maximum): B newcomers prefilled
   in one forward (ms, ms per newcomer, rows), then warm-up and measured ticks, for young
   sessions and at full context (every ring slot valid, the KV filled with random values: the
   traffic of a long session). p50/p99 from CUDA events around the program (device) and from the
   wall clock around the whole tick (host). Each level reports the floor of spec §5.13, W + the
   KV its rows read, with W for 8 and for 16 depformer steps (16.1 GB for the real model), and
   the ratio; every logit and PCM sample must be finite;
   From the full-context rows, `tick_groups`: what a period would cost with 2 and 4 tick groups
   (G steps of B / G rows against one of B; issue 31, docs/engine_pod.md "Tick phase");
6b. tick groups run (issue 44), `--group-batch 8,16,32,64`: per batch B, for G = 1, 2, 4 (G
   dividing B), G programs over G slot ranges of the pools, each captured at its B / G rows into
   the one shared graph pool as the engine does (the device memory each group's graph took, from
   `mem_get_info`, next to the output it keeps, `memory.graph_bytes`' count), then B sessions at
   full context and a period timed as the engine runs it: G steps back to back, each with its PCM
   up and its output down (p50/p99, wall and CUDA events); and the G the engine's rule takes for
   B (`live.groups.choose` over the measured steps, one newcomer's prefill owed: stage 5);
7. kernels: a profiler trace of 3 replayed ticks at B = 1 and the largest level (Chrome trace
   files next to the report), kernels per tick from it, and the host syncs per tick that
   `torch.cuda.set_sync_debug_mode("warn")` reports (one expected: the download);
8. sanity: graph replay against eager at B = 4 for 10 greedy ticks, tokens identical; and the
   `flash` backend against `masked` (eager, greedy), tokens identical;
9. fused kernels (`personaplex.kernels`, run by the tick on CUDA with Triton): each op against
   its eager composition on the device at the tick's shapes (64 rows, the real FFN widths and
   draws, the 8-bit ring's write and attention over a full window): the largest differences (the
   race: tokens identical; the 8-bit write: bytes identical), and the CUDA kernels one call
   launches (the counts take it as one). Skipped, saying so, off CUDA or without Triton;
10. the KV ring leg (issue 36), `--kv-leg 64,128`: for the weights' ring and the 8-bit one
   (`--kv-dtype fp8`) in turn, each on pools of its own: KV bytes per slot, the sessions the free
   memory admits (8 GiB reserve), and per batch size that fits, tick p50/p99 (device and wall, at
   full context) and the peak device memory; then a verdict: does fp8 admit at least 1.9 times
   the sessions, keep every level inside the 80 ms tick and every value finite; and spec
   performance §6.5's tier B (128 sessions at full context, p99 <= 40 ms), met or not.
   `--kv-leg-only` runs stages 1-3 and this one alone (what a short lent GPU runs first);
11. the pause's copies (issue 43, docs/pause.md "The copy stream"), after stage 9 on its bench:
   the largest level B below the slots runs at full context while one session's slot is parked
   and woken as the engine does through the spare (`engine_pod.copies`: a device move into the
   spare, the spare down to pinned host memory on the copy stream; up again, then moved back).
   Reported: each copy alone (ms, synchronised), the host time `down` took (the first park's
   pinned allocation, then a warm one), the ticks that ran while each copy was in flight (wall
   ms) against B's ticks without one. Asserted (`verdict`): the woken slot's rows equal, bit
   for bit, what they were when parked; and every tick that overlapped a copy took at most
   `COPY_TICK_SLACK_MS` more than the baseline's p99 (a tick held for the copy, as an inline
   park holds it, is late by the whole copy: 16-32 ms at the 7B). `--config tiny` times it at
   the tiny shapes; a bench too small for a spare slot, or a failure (memory), is reported.

`--kv-dtype fp8` runs stages 2-9 on the 8-bit ring instead of the weights' dtype.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time
import warnings
from collections.abc import Callable

import torch

from liveplex import percentiles
from liveplex.bench import tick_groups
from liveplex.engine_pod import copies, program, staging
from liveplex.engine_pod import model as engine_model
from liveplex.live import frames, groups
from liveplex.personaplex import (
    checkpoint,
    config,
    kernels,
    kv8,
    mimi,
    prefill,
    prompt,
    ring,
    sampling,
    step,
)
from liveplex.personaplex.kernels import gate, noise, race
from liveplex.personaplex.kernels import kv8 as kv8_kernels

RESERVE_BYTES = 8 * 2 ** 30
"""Kept free for activations, graphs and the allocator (spec §5.1 `memory_reserve_gib`)."""
SCHEDULE = prompt.Schedule.UPSTREAM
SANITY_BATCH = 4
"""Graph replay against eager is checked at this batch size (spec §6.12 item 7)."""
SANITY_TICKS = 10
FUSED_ROWS = 64
"""The fused kernels are checked on this many rows (the largest default bucket)."""
TICK_MS = frames.PERIOD_NS / 1e6
"""The tick's budget: one 80 ms frame."""
TIER_B = (128, 40.0)
"""Spec performance §6.5 tier B: fp8 KV, 128 sessions at full context, tick p99 <= 40 ms (H200)."""
COPY_TICK_SLACK_MS = 2.0
"""Stage 11's bound: a tick overlapping a park's or a wake's copy takes at most this much over the
baseline ticks' p99 (its own small copies may queue behind the DMA on the copy engines)."""
PAUSE_TICKS = 20
"""Stage 11's baseline ticks; the copies overlap as many ticks as they last, run back to back."""
FP8_SESSIONS_RATIO = 1.9
"""The KV leg's bar: the 8-bit ring admits at least this many times the weights' ring's sessions
(2 for the ring alone; Mimi's state and the token rows do not shrink)."""
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

    def __init__(self, lm: checkpoint.LM, codec: mimi.Mimi, slots: int, graphs: bool, backend: ring.Backend,
                 device: torch.device, kv_dtype: torch.dtype | None = None) -> None:
        cfg = lm.temporal.cfg
        gen = torch.Generator().manual_seed(0)
        voice_frames = min(50, cfg.context // 4)
        role = min(26, cfg.context - voice_frames - 15)
        voice = torch.randn(voice_frames, cfg.dim, generator=gen).to(device, lm.temporal.text_linear.weight.dtype)
        sil = prompt.silence_column()
        self.prompt = prompt.layout(voice, sil, sil, torch.randint(4, 400, (role,), generator=gen).tolist(), SCHEDULE)
        self.prefix = prefill.voice_prefix(lm.temporal, voice, kv_dtype)
        self.lm, self.codec, self.device, self.backend = lm, codec, device, backend
        self.sync = _sync(device)
        allocated = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        self.pools = program.Pools(lm, codec, slots, kv_dtype)
        self.pool_bytes = (torch.cuda.memory_allocated(device) - allocated) if device.type == "cuda" else None
        self.primed = prefill.primed_codec_state(codec)
        self.sampled = program.Program(lm, codec, self.pools, SCHEDULE, sampling.Sampling(), graphs, backend)
        self.eager = program.Program(lm, codec, self.pools, SCHEDULE, sampling.Sampling(), False, backend)
        self.pcm_stage = staging.Staging((slots, codec.cfg.frame_samples), torch.float32, device)
        self.out_stage = staging.Staging((slots, program.PACKED_WIDTH), torch.int32, device)
        # Room for every slot's prompt at once: stage 6 admits a whole level (64 and more) in one call.
        newcomers = max(26, slots)
        self.prompt_stage = staging.Staging((prefill.block_numel(newcomers * self.prompt.columns.shape[0]),),
                                            torch.long, device)
        self.pcm_stage.writable().copy_(torch.rand(slots, codec.cfg.frame_samples, generator=gen) - 0.5)

    def admit(self, slots: list[int], greedy: bool = False) -> float:
        """Prefill newcomers into consecutive `slots` as the engine does; returns ms (synchronised)."""
        self.sync()
        t0 = time.perf_counter()
        rows = slice(slots[0], slots[-1] + 1)
        self.pools.codec.reset(rows)
        self.pools.codec.decoder.copy_rows(rows, self.primed.decoder, slice(0, 1))
        newcomers = [prefill.Newcomer(s, self.prompt, self.prefix, seed=s) for s in slots]
        prefill.admit(self.lm.temporal, self.lm.depformer, self.pools.kv, self.pools.tokens, newcomers, SCHEDULE,
                      sampling.Sampling(greedy=greedy), self.backend, self.prompt_stage.upload)
        self.sync()
        return (time.perf_counter() - t0) * 1e3

    def tick(self, prog: program.Program, batch: int,
             pools: program.Pools | None = None) -> tuple[list[list[int]], bool, float | None]:
        """One engine tick: caller PCM up, `prog.run(batch)`, the packed output down (the one sync).
        `pools`: the rows `prog` runs, when it is a tick group's (a view of the bench's pools).

        Returns the emitted ids, whether every row was finite, and the program's device ms (CUDA).
        """
        events = None
        if self.device.type == "cuda":
            events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.pcm_stage.send((pools or self.pools).pcm_in[:batch])
        if events:
            events[0].record()
        out = prog.run(batch, span=self.lm.temporal.cfg.context)
        if events:
            events[1].record()
        packed = self.out_stage.download(out.packed[:batch])
        emitted = packed[:, program.EMITTED].tolist()
        finite = bool(packed[:, program.FINITE].all())
        return emitted, finite, events[0].elapsed_time(events[1]) if events else None


def _capture(bench: _Bench, buckets: list[int]) -> dict[str, object]:
    """Capture every bucket as the engine does (largest first, one pool); on failure, say so and
    fall back to eager ticks for the whole run."""
    report: dict[str, object] = {"buckets": sorted(buckets, reverse=True), "graphs": bench.sampled.graphs}
    if not bench.sampled.graphs:
        return report
    free_before, _ = torch.cuda.mem_get_info(bench.device)
    t0 = time.perf_counter()
    try:
        bench.sampled.capture(buckets)
    except Exception as e:  # noqa: BLE001  (the report carries it; the ticks then run eagerly)
        report["error"] = repr(e)
        bench.sampled = bench.eager
    torch.cuda.synchronize(bench.device)
    free_after, _ = torch.cuda.mem_get_info(bench.device)
    report.update({"capture_s": time.perf_counter() - t0, "graph_device_bytes": free_before - free_after,
                   "graphs": bench.sampled.graphs})
    bench.pools.reset(slice(0, bench.pools.slots))  # capture ran the buckets' rows
    return report


def _kernels(bench: _Bench, batch: int, out_dir: pathlib.Path) -> dict[str, object]:
    """Kernels per replayed tick from a profiler trace, and the syncs the sync debug mode flags."""
    from torch.profiler import ProfilerActivity, profile

    row: dict[str, object] = {"batch": batch}
    if bench.device.type != "cuda":
        return row
    bench.pools.reset(slice(0, batch))
    bench.admit(list(range(batch)))
    ticks = 3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(ticks):
            bench.tick(bench.sampled, batch)
    trace = out_dir / f"gpu-check-trace-b{batch}.json"
    prof.export_chrome_trace(str(trace))
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    row.update({"kernels_per_tick": len(kernels) / ticks, "trace": str(trace)})
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bench.tick(bench.sampled, batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    row["syncs_flagged_per_tick"] = [str(w.message)[:200] for w in caught]
    return row


def _fill(bench: _Bench, batch: int, full: bool) -> float:
    """`batch` newcomers prefilled into slots 0..batch-1 (ms); `full`: then every ring slot valid,
    the KV random (the traffic of a long session)."""
    pools = bench.pools
    pools.reset(slice(0, batch))
    prefill_ms = bench.admit(list(range(batch)))
    if full:
        for t in pools.kv.tensors():
            t[:batch].view(torch.uint8).random_(0, 120) if kv8.is_fp8(t.dtype) else t[:batch].normal_()
        pools.tokens.pos[:batch] = bench.lm.temporal.cfg.context  # wrapped: every ring slot valid
    return prefill_ms


def _level(bench: _Bench, batch: int, full: bool, args: argparse.Namespace,
           floor: dict[str, float]) -> dict[str, object]:
    cfg = bench.lm.temporal.cfg
    pools = bench.pools
    prefill_ms = _fill(bench, batch, full)
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
        "batch": batch, "full_context": full, "mean_position": mean_pos,
        "prefill_ms": prefill_ms, "prefill_rows": rows, "prefill_ms_per_newcomer": prefill_ms / batch,
        "prefill_ms_per_row": prefill_ms / rows, "wall": _summary(wall), "finite": finite, **floor_ms}
    if device_ms:
        row["device"] = _summary(device_ms)
    measured = row["device"]["p50_ms"] if device_ms else row["wall"]["p50_ms"]  # type: ignore[index]
    row["p50_ms"] = measured
    row["p50_over_floor_8_steps"] = measured / floor_ms["floor_8_steps_ms"]
    row["p50_over_floor_16_steps"] = measured / floor_ms["floor_16_steps_ms"]
    return row


def _groups_run(bench: _Bench, args: argparse.Namespace, floor: dict[str, float], prefill_ms: float,
                save: Callable[[], None]) -> dict[str, object]:
    """Stage 6b: each batch at G = 1, 2, 4 as the engine runs them (module docstring), and the G
    its rule takes."""
    report: dict[str, object] = {"levels": [], "chosen": [], "prefill_owed_ms": prefill_ms}
    levels: list[dict[str, object]] = report["levels"]  # type: ignore[assignment]
    for batch in args.group_batches:
        if batch > bench.pools.slots:
            levels.append({"batch": batch, "skipped": "above the derived max_sessions"})
            continue
        steps: dict[int, float] = {}
        for G in (g for g in tick_groups.GROUPS if batch % g == 0):
            try:
                row = _groups_level(bench, batch, G, args, floor)
                steps[batch // G] = float(row["step_p50_ms"])  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001  (keep what we have; the report says what failed)
                row = {"batch": batch, "groups": G, "error": repr(e)}
            levels.append(row)
            save()
            print(json.dumps(row), flush=True)
        if steps:
            report["chosen"].append(tick_groups.chosen(batch, steps, prefill_ms))  # type: ignore[union-attr]
    return report


def _groups_level(bench: _Bench, batch: int, G: int, args: argparse.Namespace,
                  floor: dict[str, float]) -> dict[str, object]:
    """Batch `batch` in `G` groups of B / G rows: each group's program over its slots, captured
    into the bench's graph pool (the memory each took), then full-context periods of G steps."""
    rows = batch // G
    views = [bench.pools.view(span) for span in groups.spans(batch, G)]
    progs = [program.Program(bench.lm, bench.codec, v, SCHEDULE, sampling.Sampling(), bench.sampled.graphs,
                             bench.backend) for v in views]
    graph_bytes: list[int] = []
    for prog in progs:
        if not prog.graphs:
            break
        free_before, _ = torch.cuda.mem_get_info(bench.device)
        prog.capture([rows], bench.sampled.graph_pool)
        torch.cuda.synchronize(bench.device)
        graph_bytes.append(free_before - torch.cuda.mem_get_info(bench.device)[0])
    _fill(bench, batch, True)
    wall, device_ms, finite = [], [], True
    for i in range(args.warmup + args.ticks):
        t0 = time.perf_counter()
        period_device = 0.0
        for prog, view in zip(progs, views, strict=True):
            _, ok, dev = bench.tick(prog, rows, view)
            finite = finite and ok
            period_device += dev or 0.0
        if i >= args.warmup:
            wall.append((time.perf_counter() - t0) * 1e3)
            if bench.device.type == "cuda":
                device_ms.append(period_device)
    row: dict[str, object] = {
        "batch": batch, "groups": G, "rows": rows, "wall": _summary(wall), "finite": finite,
        "graph_device_bytes_per_group": graph_bytes or None,
        "graph_output_bytes_per_group": rows * program.PACKED_WIDTH * 4,
        "floor_8_steps_ms": (G * floor["weights_8_steps"] + batch * bench.lm.temporal.cfg.context
                             * floor["kv_bytes_per_frame"]) / floor["bytes_per_s"] * 1e3}
    if device_ms:
        row["device"] = _summary(device_ms)
    period = (row["device"] if device_ms else row["wall"])["p50_ms"]  # type: ignore[index]
    row.update({"period_p50_ms": period, "step_p50_ms": period / G})
    return row


def _greedy_tokens(bench: _Bench, prog: program.Program, batch: int) -> list[list[list[int]]]:
    bench.pools.reset(slice(0, bench.pools.slots))
    bench.admit(list(range(batch)), greedy=True)
    return [bench.tick(prog, batch)[0] for _ in range(SANITY_TICKS)]


def _replay_matches_eager(bench: _Bench, graphs: bool) -> dict[str, object]:
    """The same newcomers, greedy, for `SANITY_TICKS` ticks: eagerly, then through a graph (captured
    here, after the measured levels), then eagerly under the other attention backend."""
    batch = min(SANITY_BATCH, bench.pools.slots)
    greedy = sampling.Sampling(greedy=True)

    def prog(use_graphs: bool, backend: ring.Backend) -> program.Program:
        p = program.Program(bench.lm, bench.codec, bench.pools, SCHEDULE, greedy, use_graphs, backend)
        p.capture([batch])
        return p

    eager = _greedy_tokens(bench, prog(False, bench.backend), batch)
    replayed = _greedy_tokens(bench, prog(graphs, bench.backend), batch)
    other = ring.Backend.MASKED if bench.backend is ring.Backend.FLASH else ring.Backend.FLASH
    report: dict[str, object] = {"batch": batch, "ticks": SANITY_TICKS, "graphs": graphs,
                                 "tokens_identical": eager == replayed}
    if bench.device.type == "cuda" or other is ring.Backend.MASKED:
        report[f"{other.value}_tokens_identical"] = _greedy_tokens(bench, prog(False, other), batch) == eager
    return report


def _launches(call: Callable[[], object]) -> int:
    """CUDA kernels one call launches (after a first call: Triton compiles on its first launch)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def _difference(got: torch.Tensor, want: torch.Tensor) -> dict[str, float]:
    delta = (got.float() - want.float()).abs()
    return {"max_abs": float(delta.max()), "max_rel": float((delta / want.float().abs().clamp_min(1e-30)).max()),
            "identical_fraction": float((got == want).float().mean())}


def _fused(lm: checkpoint.LM, device: torch.device) -> dict[str, object]:
    """Each fused op against its eager composition on the device, at the tick's shapes."""
    if device.type != "cuda" or not kernels.fused(device):
        return {"skipped": "the fused kernels run on CUDA, with Triton"}
    cfg, dtype = lm.temporal.cfg, lm.temporal.text_linear.weight.dtype
    gen = torch.Generator(device=device).manual_seed(0)
    report: dict[str, object] = {"rows": FUSED_ROWS}
    for name, hidden in (("temporal", cfg.hidden), ("depformer", cfg.dep_hidden)):
        y = (3 * torch.randn(FUSED_ROWS, 2 * hidden, device=device, generator=gen)).to(dtype)
        fused = gate.silu_and_mul(y)
        report[f"silu_and_mul_{name}"] = {
            "vs_eager": _difference(fused, gate.reference(y)), "vs_fp32": _difference(fused, gate.reference(y.float())),
            "kernels_per_call": _launches(lambda y=y: gate.silu_and_mul(y))}
    lanes = sampling.Lanes.of(step.draw_cards(cfg.text_card, cfg.card), device)
    key = sampling.key(torch.randint(-2 ** 62, 2 ** 62, (FUSED_ROWS,), device=device, generator=gen))
    column = torch.randint(0, 10 ** 6, (FUSED_ROWS,), device=device, generator=gen)
    hashed = (key, column, lanes.stream, lanes.ids)
    table = noise.race_noise(*hashed)
    report["race_noise"] = {"vs_eager": _difference(table, sampling.lane_noise(*hashed)),
                            "kernels_per_call": _launches(lambda: noise.race_noise(*hashed))}
    sample = sampling.Sampling()
    for name, draw, top_k, temperature in (("text", 0, sample.text_top_k, sample.text_temperature),
                                           ("audio", 1, sample.audio_top_k, sample.audio_temperature)):
        columns = lanes.split(table)[draw]
        top = sampling.candidates(torch.randn(FUSED_ROWS, columns.shape[1], device=device, generator=gen), top_k)
        args = (top.values, top.indices, columns, temperature)
        report[f"race_winner_{name}"] = {"tokens_identical": bool(torch.equal(race.race_winner(*args),
                                                                              race.reference(*args))),
                                         "kernels_per_call": _launches(lambda args=args: race.race_winner(*args))}
    report["kv8"] = _kv8_kernels(lm, device, gen)
    return report


def _kv8_kernels(lm: checkpoint.LM, device: torch.device, gen: torch.Generator) -> dict[str, object]:
    """The 8-bit ring's write and attention against their eager compositions, 64 rows at full context."""
    cfg, dtype = lm.temporal.cfg, lm.temporal.text_linear.weight.dtype
    pool = lm.temporal.new_pool(FUSED_ROWS, kv8.FP8)
    assert pool.scale is not None and pool.inverse is not None
    pool.kv.view(torch.uint8).random_(0, 120, generator=gen)
    offsets = ring.Offsets.of(pool)
    position = torch.full((FUSED_ROWS,), cfg.context - 1, device=device)
    plan = ring.live_plan(position, pool, offsets, ring.Backend.FLASH, cfg.context)
    qkv = torch.randn(FUSED_ROWS, 3, cfg.num_heads, cfg.head_dim, device=device, generator=gen).to(dtype)
    fused, eager = pool.packed.clone(), pool.packed.clone()
    write = (plan.write[0], qkv[:, 1:], pool.inverse[0])
    kv8_kernels.kv8_write(fused, *write)
    kv8_kernels.write_reference(eager, *write)
    assert plan.cu_q is not None and plan.cu_k is not None and plan.used is not None
    attend = (qkv[:, 0], fused, pool.scale[0], plan.cu_q, plan.cu_k[0], plan.used)
    out = kv8_kernels.kv8_attend(*attend, 1, cfg.context, False)
    return {"write_bytes_identical": bool(torch.equal(fused.view(torch.uint8), eager.view(torch.uint8))),
            "write_kernels_per_call": _launches(lambda: kv8_kernels.kv8_write(fused, *write)),
            "attend_vs_eager": _difference(out, kv8_kernels.attend_reference(*attend, cfg.context, False)),
            "attend_kernels_per_call": _launches(lambda: kv8_kernels.kv8_attend(*attend, 1, cfg.context, False))}


def _admitted(device: torch.device, per_slot: int) -> int | None:
    """Sessions the free device memory admits at `per_slot` bytes each (None off CUDA)."""
    if device.type != "cuda":
        return None
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    return int((free - RESERVE_BYTES) // per_slot)


def _overlapped(bench: _Bench, batch: int, copy: copies.Copy) -> list[float]:
    """Ticks of `batch` rows, back to back, while `copy` is in flight: each one's wall ms."""
    ticks = []
    while not copy.done():
        t0 = time.perf_counter()
        bench.tick(bench.sampled, batch)
        ticks.append((time.perf_counter() - t0) * 1e3)
    return ticks


def _pause_copies(bench: _Bench, levels: list[int]) -> dict[str, object]:
    """Stage 11 (module docstring): a park and a wake through the spare beside B's ticks."""
    if not levels:
        return {"skipped": "no level leaves a spare slot"}
    batch, pools, device = levels[-1], bench.pools, bench.device
    spare, slot = pools.slots - 1, batch - 1
    stream = copies.Copies(device)
    _fill(bench, batch, full=True)
    for _ in range(3):  # warm
        bench.tick(bench.sampled, batch)
    base = []
    for _ in range(PAUSE_TICKS):
        t0 = time.perf_counter()
        bench.tick(bench.sampled, batch)
        base.append((time.perf_counter() - t0) * 1e3)
    row: dict[str, object] = {"batch": batch, "slot_bytes": pools.slot_bytes, "baseline": _summary(base)}

    def alone(issue: Callable[[], copies.Copy]) -> dict[str, float]:
        """A copy with nothing else queued: host ms to issue it, ms until it is done."""
        bench.sync()
        t0 = time.perf_counter()
        copy = issue()
        issued = time.perf_counter()
        copy.wait()
        return {"host_ms": (issued - t0) * 1e3, "copy_ms": (time.perf_counter() - t0) * 1e3}

    row["first_park"] = alone(lambda: stream.down(pools, slot)[1])  # allocates the pinned rows; freed at once
    row["warm_park"] = alone(lambda: stream.down(pools, slot)[1])  # the host allocator's cached rows again
    state = [t for s in (pools.kv, pools.codec, pools.tokens) for t in s.tensors()]
    snapshot = [t[slot:slot + 1].clone() for t in state]
    bench.sync()
    pools.move(slot, spare)  # the park: the slot's rows into the spare, then down on the copy stream
    rows, park = stream.down(pools, spare)
    row["park_ticks"] = _overlapped(bench, batch, park)
    park.wait()
    row["wake_alone"] = alone(lambda: stream.up(pools, spare, rows))
    wake = stream.up(pools, spare, rows)  # the wake: up into the spare beside the ticks, then moved back
    row["wake_ticks"] = _overlapped(bench, batch, wake)
    wake.before(device)
    pools.move(spare, slot)
    bench.sync()
    exact = all(torch.equal(a.view(torch.uint8), t[slot:slot + 1].view(torch.uint8))
                for a, t in zip(snapshot, state, strict=True))
    bound = row["baseline"]["p99_ms"] + COPY_TICK_SLACK_MS  # type: ignore[index]
    late = [ms for ms in row["park_ticks"] + row["wake_ticks"] if ms > bound]  # type: ignore[operator]
    row["verdict"] = {"woken_bit_exact": exact, "tick_bound_ms": bound, "ticks_over_bound": late,
                      "ok": exact and not late}
    return row


def _kv_leg_ring(lm: checkpoint.LM, codec: mimi.Mimi, name: str, batches: list[int], graphs: bool,
                 backend: ring.Backend, device: torch.device, args: argparse.Namespace,
                 floor: dict[str, float]) -> dict[str, object]:
    """One ring dtype: bytes, sessions admitted, and each batch that fits at full context."""
    cfg = lm.temporal.cfg
    kv_dtype = engine_model.KV_DTYPES[name]
    kv_slot = lm.temporal.new_pool(1, kv_dtype).nbytes_per_slot
    per_slot = kv_slot + codec.init_state(1).nbytes
    admitted = _admitted(device, per_slot)
    fits = [b for b in batches if admitted is None or b <= admitted]
    out: dict[str, object] = {"kv_dtype": name, "kv_bytes_per_slot": kv_slot, "bytes_per_slot_estimate": per_slot,
                              "sessions_admitted": admitted, "levels": []}
    levels: list[dict[str, object]] = [{"batch": b, "skipped": "above the sessions admitted"}
                                       for b in batches if b not in fits]
    if fits:
        bench = _Bench(lm, codec, max(fits), graphs, backend, device, kv_dtype)
        out["capture"] = _capture(bench, fits)
        leg_floor = {**floor, "kv_bytes_per_frame": cfg.num_layers * 2 * cfg.dim * kv_dtype.itemsize}
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for b in fits:
            try:
                row = _level(bench, b, True, args, leg_floor)
            except Exception as e:  # noqa: BLE001  (the report says what failed)
                row = {"batch": b, "error": repr(e)}
            if device.type == "cuda":
                row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
            levels.append(row)
            print(json.dumps({"kv_dtype": name, **row}), flush=True)
        del bench
    out["levels"] = sorted(levels, key=lambda r: r["batch"])  # type: ignore[arg-type, return-value]
    return out


def kv_verdict(legs: list[dict[str, object]]) -> dict[str, object]:
    """Whether the 8-bit ring earns the default: the sessions it admits against the weights' ring,
    every measured level inside the tick and finite. Pure: the CPU test drives it."""
    full, eight = legs
    reasons = []
    if full["sessions_admitted"] is not None and eight["sessions_admitted"] is not None:
        ratio = eight["sessions_admitted"] / max(1, full["sessions_admitted"])  # type: ignore[operator]
        if ratio < FP8_SESSIONS_RATIO:
            reasons.append(f"fp8 admits {ratio:.2f}x the sessions, under {FP8_SESSIONS_RATIO}x")
    else:
        ratio = None
    measured = [r for r in eight["levels"] if "skipped" not in r]  # type: ignore[union-attr]
    if not measured:
        reasons.append("no fp8 level was measured")
    for r in measured:
        if "error" in r:
            reasons.append(f"fp8 batch {r['batch']}: {r['error']}")
            continue
        p99 = (r.get("device") or r["wall"])["p99_ms"]
        if not r["finite"]:
            reasons.append(f"fp8 batch {r['batch']}: non-finite logits or PCM")
        if p99 > TICK_MS:
            reasons.append(f"fp8 batch {r['batch']}: tick p99 {p99:.1f} ms over {TICK_MS:.0f} ms")
    tier_b = next((r for r in measured if r["batch"] == TIER_B[0] and "error" not in r), None)
    p99_b = None if tier_b is None else (tier_b.get("device") or tier_b["wall"])["p99_ms"]
    return {"fp8_sessions_ratio": ratio, "fp8_ready": not reasons, "reasons": reasons,
            "tier_b": {"batch": TIER_B[0], "p99_ms": p99_b, "target_p99_ms": TIER_B[1],
                       "met": None if p99_b is None else p99_b <= TIER_B[1]}}


@torch.inference_mode()
def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(config.CONFIGS), default="personaplex-7b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default=None, help="LM dtype (Mimi is fp32)")
    parser.add_argument("--kv-dtype", choices=["fp8"], default=None,
                        help="the KV ring of stages 2-9 (default: the LM dtype)")
    parser.add_argument("--kv-leg", default="64,128",
                        help="stage 10's batch sizes, both ring dtypes ('' skips it; default: %(default)s)")
    parser.add_argument("--kv-leg-only", action="store_true", help="stages 1-3 and 10 only")
    parser.add_argument("--batch", default="1,8,16,32,64")
    parser.add_argument("--group-batch", default="8,16,32,64",
                        help="stage 6b's batch sizes, each run at G = 1, 2, 4 ('' skips it; default: %(default)s)")
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--no-cuda-graphs", action="store_true", help="run the ticks eagerly on CUDA")
    parser.add_argument("--attention", choices=[b.value for b in ring.Backend], default=None,
                        help="temporal attention backend (default: flash on CUDA, masked on CPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (host work; the CPU smoke test)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("gpu-check.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    graphs = device.type == "cuda" and not args.no_cuda_graphs
    backend = ring.Backend(args.attention or ("flash" if device.type == "cuda" else "masked"))
    cfg = config.CONFIGS[args.config]()
    mimi_cfg = mimi.mimi_config() if args.config == "personaplex-7b" else mimi.tiny_config()
    levels = sorted({int(x) for x in args.batch.split(",")})
    args.group_batches = sorted({int(x) for x in args.group_batch.split(",") if x})
    report: dict[str, object] = {
        "config": args.config, "device": str(device), "dtype": str(dtype), "mimi_dtype": "torch.float32",
        "torch": torch.__version__, "cuda": torch.version.cuda, "host": platform.node(), "attention": backend.value,
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
    kv_dtype = None if args.kv_dtype is None else engine_model.KV_DTYPES[args.kv_dtype]
    kv_element = element if kv_dtype is None else kv_dtype.itemsize
    report["kv_dtype"] = str(kv_dtype or dtype)
    kv_slot = lm.temporal.new_pool(1, kv_dtype).nbytes_per_slot
    floor = {"weights_8_steps": _weights_read_bytes(cfg, config.AGENT_CODEBOOKS, element),
             "weights_16_steps": _weights_read_bytes(cfg, cfg.dep_steps, element),
             "kv_bytes_per_frame": cfg.num_layers * 2 * cfg.dim * kv_element}
    report.update({
        "build_s": time.perf_counter() - t0,
        "weights_bytes": sum(p.numel() * p.element_size() for m in (lm.temporal, lm.depformer) for p in m.parameters()),
        "mimi_weights_bytes": sum(t.numel() * t.element_size() for t in codec.state_dict().values()),
        "kv_bytes_per_slot": kv_slot, "mimi_state_bytes_per_slot": codec.init_state(1).nbytes,
        "kv_bytes_per_frame": floor["kv_bytes_per_frame"], "spec_kv_bytes_per_frame": 512 * 1024,
        "spec_bytes_per_slot": 1_572_864_000 + 16_500_000 if args.config == "personaplex-7b" else None,
        "floor_inputs": floor})
    slots = max([levels[-1], *args.group_batches])
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
    if not args.kv_leg_only:
        _stages(lm, codec, levels, slots, graphs, backend, device, kv_dtype, args, floor, report, save)
    if args.kv_leg:
        names = [{torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype], "fp8"]
        legs = [_kv_leg_ring(lm, codec, name, sorted({int(x) for x in args.kv_leg.split(",")}), graphs, backend,
                             device, args, floor) for name in names]
        report["kv_leg"] = {"rings": legs, "verdict": kv_verdict(legs)}
        print(json.dumps(report["kv_leg"]["verdict"]), flush=True)  # type: ignore[index]
    report["total_s"] = time.perf_counter() - t0
    save()
    return 0


def _stages(lm: checkpoint.LM, codec: mimi.Mimi, levels: list[int], slots: int, graphs: bool, backend: ring.Backend,
            device: torch.device, kv_dtype: torch.dtype | None, args: argparse.Namespace, floor: dict[str, float],
            report: dict[str, object], save: Callable[[], None]) -> None:
    """Stages 4-9 on one bench, freed before the KV leg builds its own."""
    bench = _Bench(lm, codec, slots, graphs, backend, device, kv_dtype)
    report.update({"slots": slots, "bytes_per_slot": bench.pools.slot_bytes, "pool_bytes_measured": bench.pool_bytes,
                   "bytes_per_slot_measured": bench.pool_bytes / slots if bench.pool_bytes else None,
                   "prompt_rows": bench.prompt.columns.shape[0], "voice_frames": bench.prompt.voice.shape[0]})
    runnable = [b for b in levels if b <= slots]
    report["capture"] = _capture(bench, runnable)
    save()
    report["prefill_one_newcomer_ms"] = sorted(bench.admit([0]) for _ in range(5))[2]
    report["prefill_burst_ms"] = {n: bench.admit(list(range(n))) for n in (8, 26) if n <= slots}
    save()
    deep: list[dict[str, float]] = []
    """The full-context ticks' p50 per batch (device time where CUDA events gave it)."""
    for b in levels:
        if b > slots:
            report["levels"].append({"batch": b, "skipped": "above the derived max_sessions"})  # type: ignore[union-attr]
            save()
            break
        for full in (False, True):
            try:
                row = _level(bench, b, full, args, floor)
                if full:
                    deep.append({"batch": b, "tick_p50_ms": row["p50_ms"]})
            except Exception as e:  # noqa: BLE001  (keep what we have; the report says what failed)
                row = {"batch": b, "full_context": full, "error": repr(e)}
            report["levels"].append(row)  # type: ignore[union-attr]
            save()
            print(json.dumps(row), flush=True)
    report["tick_groups"] = tick_groups.timed(deep)  # issue 31: what G groups would cost a period
    save()
    if args.group_batches:
        report["groups_run"] = _groups_run(bench, args, floor, float(report["prefill_one_newcomer_ms"]), save)  # type: ignore[arg-type]
        save()
    try:
        report["kernels"] = [_kernels(bench, b, args.out.parent) for b in sorted({runnable[0], runnable[-1]})]
    except Exception as e:  # noqa: BLE001
        report["kernels"] = {"error": repr(e)}
    save()
    try:
        report["replay_vs_eager"] = _replay_matches_eager(bench, graphs)
    except Exception as e:  # noqa: BLE001
        report["replay_vs_eager"] = {"error": repr(e)}
    save()
    try:
        report["fused"] = _fused(lm, device)
    except Exception as e:  # noqa: BLE001
        report["fused"] = {"error": repr(e)}
    save()
    try:
        report["pause_copies"] = _pause_copies(bench, [b for b in runnable if b < slots])
    except Exception as e:  # noqa: BLE001  (memory for the pinned rows and the snapshot, say)
        report["pause_copies"] = {"error": repr(e)}
    save()
    print(json.dumps(report["pause_copies"]), flush=True)
    del bench
    if device.type == "cuda":
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
