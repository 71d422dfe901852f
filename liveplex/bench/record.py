"""`liveplex bench record`: what a relayed session's resume record costs the pod per tick, and its size.

Three figures (docs/continuity.md, "Resume after a pod is lost"), each as µs per session per tick:

- **sim tick**: two `SimEngine`s of `--sessions` sessions under the same caller audio, one with
  checkpoints and one without, ticked alternately (so both see the same machine load); the
  difference of their tick times is the engine's share (a `TICKS` chunk per session per tick).
- **chunk**: the host work of PersonaPlex's `TICKS` chunk (the column fed, from the history, and
  the token tail from the tick's packed output) at a mid-call position.
- **event**: the pod's side on the loop: the leg splitting a tick's outputs around its checkpoint
  and writing it as a `hop.CHECKPOINT` event (base64 and the text), to a peer that drops it.

And the record's sizes: the head and a chunk of each engine, and bytes per minute of call.
"""

from __future__ import annotations

import argparse
import json


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liveplex bench record", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=64, help="sessions per sim engine")
    p.add_argument("--ticks", type=int, default=2000, help="ticks per sim engine")
    p.add_argument("--out", help="also write the JSON here")
    return p


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from liveplex.bench import record_costs  # torch: after parsing, so that `--help` needs no extra

    text = json.dumps(record_costs.report(args.sessions, args.ticks), indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0
