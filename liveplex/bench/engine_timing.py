"""`liveplex bench engine`'s measurements (`liveplex.bench.engine` parses the flags, then imports
this: torch and the model). See that module for what is timed and counted, and how.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import time

import torch

from liveplex import percentiles
from liveplex.bench import engine_counts, tick_groups
from liveplex.engine_pod import model as engine_model
from liveplex.engine_pod import settings as engine_settings
from liveplex.personaplex import (
    checkpoint,
    config,
    prefill,
    prompt,
    ring,
    sampling,
    step,
)


@dataclasses.dataclass
class _Level:
    """B sessions admitted together, and their tick times."""

    batch: int
    pool: ring.KVPool
    offsets: ring.Offsets
    state: step.TokenState
    prefill_ms: float
    prefill_rows: int
    ticks_us: list[int] = dataclasses.field(default_factory=list)


def _admit(lm: checkpoint.LM, batch: int, schedule: prompt.Schedule, sample: sampling.Sampling) -> _Level:
    cfg, temp = lm.temporal.cfg, lm.temporal
    gen = torch.Generator().manual_seed(1)
    voice = torch.randn(5, cfg.dim, generator=gen)
    ring_n = prompt.silence_column()
    role_tokens = min(26, cfg.context - 5 - 15)  # the default prompt, or what the tiny window holds
    p = prompt.layout(voice, ring_n, ring_n, torch.randint(4, 400, (role_tokens,), generator=gen).tolist(), schedule)
    pool, state = temp.new_pool(batch), step.TokenState.allocate(batch)
    prefix = prefill.voice_prefix(temp, voice)
    t0 = time.perf_counter_ns()
    prefill.admit(temp, lm.depformer, pool, state, [prefill.Newcomer(i, p, prefix, seed=i) for i in range(batch)],
                  schedule, sample)
    return _Level(batch, pool, ring.Offsets.of(pool), state, (time.perf_counter_ns() - t0) / 1e6,
                  batch * p.columns.shape[0])


@torch.inference_mode()
def measure(cfg: config.LMConfig, batches: list[int], ticks: int, warmup: int,
            schedule: prompt.Schedule) -> list[dict[str, float]]:
    """Tick times for each batch size, measured interleaved; one row per batch size, in order."""
    lm = checkpoint.random_lm(cfg, seed=0)
    sample = sampling.Sampling()
    levels = [_admit(lm, b, schedule, sample) for b in batches]
    gen = torch.Generator().manual_seed(2)
    for r in range(warmup + ticks):
        for i in range(len(levels)):
            level = levels[(i + r) % len(levels)]
            user = torch.randint(0, cfg.card, (level.batch, config.AGENT_CODEBOOKS), generator=gen)
            span = min(cfg.context, int(level.state.pos.max()) + 1)  # the engine's host knows it
            t0 = time.perf_counter_ns()
            pos = level.state.pos
            plan = ring.live_plan(pos, level.pool, level.offsets, ring.Backend.MASKED, span)
            draw = step.sampled_draws(sample, level.state.key, pos + 1, cfg.text_card, cfg.card)
            step.live_step(lm.temporal, lm.depformer, level.pool, level.state, user, schedule, draw, plan)
            if r >= warmup:
                level.ticks_us.append((time.perf_counter_ns() - t0) // 1000)
    rows = []
    for level in levels:
        summary = percentiles.summarize(level.ticks_us)
        rows.append({"batch": level.batch, "tick_p50_ms": summary.p50, "tick_p99_ms": summary.p99,
                     "prefill_ms": level.prefill_ms, "prefill_rows": level.prefill_rows})
    for row in rows:
        row["x_batch_1"] = row["tick_p50_ms"] / rows[0]["tick_p50_ms"]
    return rows


def count(args: argparse.Namespace) -> dict[str, object]:
    """`--count`: program and prefill counts per batch size, and the engine's host syncs."""
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype or ("bf16" if args.device != "cpu" else "fp32")]
    backend = ring.Backend(args.attention)
    kv_dtype = None if args.kv_dtype is None else engine_model.KV_DTYPES[args.kv_dtype]
    model = engine_counts.build(args.config, args.device, dtype, kv_dtype)
    batches = [int(b) for b in args.batch.split(",")]
    buckets = list(engine_settings.DEFAULT_BUCKETS) + [max(batches)]
    levels = engine_counts.levels(model, batches, buckets, backend)
    newcomer = engine_counts.newcomer(model, backend)
    host = engine_counts.engine_syncs()
    per_session = engine_counts.kv_bytes_per_session(model.cfg)
    print(f"config {args.config} on {args.device}, {dtype}, KV ring {args.kv_dtype or 'as the weights'}, "
          f"attention {backend.value}")
    print("KV ring per session: " + ", ".join(f"{k} {v / 2 ** 30:.3f} GiB" for k, v in per_session.items()))
    print(f"{'batch':>6} {'bucket':>7} {'position':>9} {'ops':>6} {'syncs':>6} {'KV read MB':>11} {'valid KV MB':>12}")
    for row in levels:
        measured = "" if row["kv_measured"] else "*"
        print(f"{row['batch']:>6} {row['bucket']:>7} {row['position']:>9} {row['ops']:>6} {len(row['syncs']):>6} "
              f"{row['kv_bytes'] / 1e6:>10.1f}{measured or ' '} {row['valid_kv_bytes'] / 1e6:>12.1f}")
    print(f"newcomer prefill ({newcomer['rows']} rows): {newcomer['ops']} ops, {len(newcomer['syncs'])} syncs, "
          f"KV read {newcomer['kv_bytes'] / 1e6:.1f} MB{'' if newcomer['kv_measured'] else '*'}, "
          f"valid {newcomer['valid_kv_bytes'] / 1e6:.1f} MB")
    print(f"engine host syncs per tick (tiny engine, CPU): {host['syncs_per_tick']} served, "
          f"{host['syncs_in_an_admitting_tick']} while admitting ({', '.join(host['what_syncs'])})")
    if any(not row["kv_measured"] for row in levels) or not newcomer["kv_measured"]:
        print("* the meta device has no lengths: the varlen kernel's upper bound; it reads the valid KV")
    weights = engine_counts.weight_bytes(model)
    groups = tick_groups.counted(levels, weights)
    print(f"tick groups (full context; weights {weights / 2 ** 30:.2f} GiB read per step):")
    print(f"{'batch':>6} {'groups':>7} {'ops/period':>11} {'weights GiB/period':>19} {'KV GiB/period':>14}")
    for g in groups:
        print(f"{g['batch']:>6} {g['groups']:>7} {g['ops_per_period']:>11} "
              f"{g['weight_bytes_per_period'] / 2 ** 30:>19.2f} {g['kv_bytes_per_period'] / 2 ** 30:>14.2f}")
    parks = engine_counts.parks(model, int(args.host_budget_gib * 2 ** 30))
    print(f"idle pause (per session, PCIe 5 at {engine_counts.PCIE5_BYTES_S / 1e9:.0f} GB/s each way; "
          f"{args.host_budget_gib:g} GiB host budget):")
    print(f"{'gpu':>10} {'ring':>5} {'park/wake GiB':>14} {'pinned GiB':>11} {'copy ms':>8} {'wakes/tick':>11} "
          f"{'today':>6} {'paused':>7} {'held':>5} {'active':>7}")
    for p in parks:
        print(f"{p['gpu']:>10} {p['ring']:>5} {p['park_bytes'] / 2 ** 30:>14.3f} {p['held_bytes'] / 2 ** 30:>11.3f} "
              f"{p['copy_ms']:>8.1f} {p['wakes_per_tick']:>11} {p['slots']:>6} {p['paused']:>7} {p['held']:>5} "
              f"{p['active']:>7}")
    return {"config": args.config, "device": args.device, "dtype": str(dtype), "kv_dtype": args.kv_dtype,
            "kv_bytes_per_session": per_session, "attention": backend.value,
            "torch": torch.__version__, "date": datetime.date.today().isoformat(), "levels": levels,
            "newcomer": newcomer, "engine": host, "weight_bytes": weights, "tick_groups": groups,
            "parks": parks}


def run(args: argparse.Namespace) -> int:
    """The run `main` parsed: `--count`'s counts, or the timed ticks; the report is also written to `--out`."""
    torch.set_num_threads(args.threads)
    if args.count:
        report = count(args)
        if args.out:
            args.out.write_text(json.dumps(report, indent=2))
        return 0
    cfg = config.CONFIGS[args.config]()
    batches = [int(b) for b in args.batch.split(",")]
    load_before = os.getloadavg()
    print(f"config {args.config}, {args.threads} thread(s), schedule {args.schedule}, batch sizes interleaved")
    rows = measure(cfg, batches, args.ticks, args.warmup, prompt.Schedule(args.schedule))
    print(f"{'batch':>6} {'p50 ms':>9} {'p99 ms':>9} {'x batch 1':>10}")
    for row in rows:
        print(f"{row['batch']:>6} {row['tick_p50_ms']:>9.2f} {row['tick_p99_ms']:>9.2f} {row['x_batch_1']:>10.2f}")
    groups = tick_groups.timed(rows)
    print(f"tick groups: {'batch':>6} {'groups':>7} {'period ms':>10} {'x one group':>12}")
    for g in groups:
        print(f"             {g['batch']:>6.0f} {g['groups']:>7.0f} {g['period_ms']:>10.2f} {g['x_one_group']:>12.2f}")
    report = {"config": args.config, "threads": args.threads, "schedule": args.schedule,
              "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
              "date": datetime.date.today().isoformat(), "results": rows, "tick_groups": groups}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0
