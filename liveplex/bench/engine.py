"""`liveplex bench engine`: tick time of the batched PersonaPlex live step per batch size, on CPU.

Builds a config (`tiny` or `small`) with seeded random weights — speed does not depend on the
weights' values — admits B sessions through the real prefill (a 5-frame voice, a 26-token
prompt, shorter in the tiny window), then times live ticks (temporal step, text draw, 8 depformer steps, sampled) and prints
p50/p99 per batch size. Mimi is not included: the figure is the language model's share of a tick.
"""

from __future__ import annotations

import argparse
import json
import logging
import pathlib
import sys
import time

import torch

from liveplex.personaplex import checkpoint, config, prefill, prompt, sampling, step

logger = logging.getLogger(__name__)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


@torch.no_grad()
def measure(cfg: config.LMConfig, batch: int, ticks: int, warmup: int, schedule: prompt.Schedule) -> dict[str, float]:
    """Tick times in ms for `batch` sessions admitted together."""
    lm = checkpoint.random_lm(cfg, seed=0)
    temp, dep = lm.temporal, lm.depformer
    gen = torch.Generator().manual_seed(1)
    voice = torch.randn(5, cfg.dim, generator=gen)
    ring_n = prompt.silence_column()
    role_tokens = min(26, cfg.context - 5 - 15)  # the default prompt, or what the tiny window holds
    p = prompt.layout(voice, ring_n, ring_n, torch.randint(4, 400, (role_tokens,), generator=gen).tolist(), schedule)
    pool, state = temp.new_pool(batch), step.TokenState.allocate(batch)
    prefix = prefill.voice_prefix(temp, voice)
    sample = sampling.Sampling()
    t0 = time.perf_counter_ns()
    prefill.admit(temp, dep, pool, state, [prefill.Newcomer(i, p, prefix, seed=i) for i in range(batch)], schedule, sample)
    prefill_ms = (time.perf_counter_ns() - t0) / 1e6
    times = []
    for t in range(warmup + ticks):
        user = torch.randint(0, cfg.card, (batch, config.AGENT_CODEBOOKS), generator=gen)
        t0 = time.perf_counter_ns()
        step.live_step(temp, dep, pool, state, user, schedule, sample)
        if t >= warmup:
            times.append((time.perf_counter_ns() - t0) / 1e6)
    return {"batch": batch, "tick_p50_ms": _percentile(times, 50), "tick_p99_ms": _percentile(times, 99),
            "prefill_ms": prefill_ms, "prefill_rows": batch * p.columns.shape[0]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="liveplex bench engine", description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=["tiny", "small"], default="small")
    parser.add_argument("--batch", default="1,2,4,8,16,32", help="comma-separated batch sizes")
    parser.add_argument("--ticks", type=int, default=50, help="measured ticks per batch size")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--schedule", choices=[s.value for s in prompt.Schedule], default=prompt.DEFAULT_SCHEDULE.value)
    parser.add_argument("--out", type=pathlib.Path, help="write the report as JSON")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = config.CONFIGS[args.config]()
    batches = [int(b) for b in args.batch.split(",")]
    rows = []
    print(f"config {args.config}, {args.threads} thread(s), schedule {args.schedule}")
    print(f"{'batch':>6} {'p50 ms':>9} {'p99 ms':>9} {'x batch 1':>10}")
    for b in batches:
        row = measure(cfg, b, args.ticks, args.warmup, prompt.Schedule(args.schedule))
        rows.append(row)
        ratio = row["tick_p50_ms"] / rows[0]["tick_p50_ms"]
        print(f"{b:>6} {row['tick_p50_ms']:>9.2f} {row['tick_p99_ms']:>9.2f} {ratio:>10.2f}", flush=True)
    report = {"config": args.config, "threads": args.threads, "schedule": args.schedule,
              "torch": torch.__version__, "results": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
