"""`liveplex bench engine`: tick time of the batched PersonaPlex live step per batch size, on CPU.

Builds a config (`tiny` or `small`) with seeded random weights once (speed does not depend on the
weights' values) and admits B sessions per batch size through the real prefill (a 5-frame voice,
a 26-token prompt, shorter in the tiny window). It then times live ticks (temporal step, text
draw, 8 depformer steps, sampled) of **all batch sizes interleaved**: round after round, one tick
of each batch size, in a rotating order. On a shared machine the load drifts over seconds; timing
batch 1 first and batch 32 a minute later made the ratio swing between 3.5x and 4.5x, while
interleaving exposes every batch size to the same load. Ticks run under `torch.inference_mode`.
Mimi is not included: the figure is the language model's share of a tick.

`--count` instead counts, exactly, what one served tick and one newcomer's prefill run: aten
ops, host syncs and KV bytes read by attention, at any config's real shapes (`--device meta`
needs no memory), and the host syncs of a real engine's tick (`liveplex.bench.engine_counts`).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from liveplex.engine_pod import settings as engine_settings
from liveplex.personaplex import config


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex bench engine", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--config", choices=sorted(config.CONFIGS), default="small",
                        help="tiny or small for timing; any, personaplex-7b included, with --count "
                             "(default: %(default)s)")
    parser.add_argument("--count", action="store_true",
                        help="count ops, syncs and KV bytes instead of timing (default: timing)")
    parser.add_argument("--device", default="cpu",
                        help="with --count: cpu or meta (real shapes, no memory) (default: %(default)s)")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], help="with --count (default: bf16 off the CPU)")
    parser.add_argument("--kv-dtype", choices=["fp8"], help="with --count: the KV ring counted (default: the weights')")
    parser.add_argument("--attention", choices=engine_settings.ATTENTION, default="flash",
                        help="with --count: the attention backend counted (default: %(default)s, CUDA's)")
    parser.add_argument("--batch", default="1,2,4,8,16,32", help="comma-separated batch sizes (default: %(default)s)")
    parser.add_argument("--ticks", type=int, default=50, help="measured ticks per batch size (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured ticks first (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: %(default)s)")
    parser.add_argument("--schedule", choices=engine_settings.SCHEDULES,
                        default=engine_settings.DEFAULT_SCHEDULE,
                        help="which user codes enter the fed column (default: %(default)s)")
    parser.add_argument("--host-budget-gib", type=float, default=512,
                        help="with --count: pinned host memory for paused sessions (default: %(default)s)")
    parser.add_argument("--out", type=pathlib.Path, help="write the report as JSON (default: none)")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.count and args.config not in ("tiny", "small"):
        parser.error("timing runs take --config tiny or small")
    from liveplex.bench import engine_timing  # torch: after parsing, so that `--help` needs no extra

    return engine_timing.run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
