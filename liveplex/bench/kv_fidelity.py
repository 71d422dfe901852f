"""`liveplex bench kv-fidelity`: what the 8-bit KV ring changes in the logits, on the CPU (issue 36).

The tiny PersonaPlex and the tiny Moshi (`liveplex personaplex make-tiny`, fp32 weights) each run
twice in lockstep, once over a full-precision (fp32) ring and once over an e4m3 ring
(`personaplex.kv8`): three sessions batched, the third joining late, each for `frames` frames, far
past the window (the tiny window is 40 frames, so the rings wrap). Both are driven with the same
fed tokens: the full-precision run draws greedily, and the 8-bit run is teacher-forced to its
draws (admission draws included), so one flipped draw does not fork the rest. User codes are
random, the same for both. Per frame of every session it compares the text logits and the eight
audio codebooks' logits (cosine), and reports the greedy draw each run would have made, per
codebook (agreement). Both run `masked` attention (the CPU's; that `flash` reads an 8-bit ring as
`masked` does is tests/personaplex/test_kv8.py's). JSON on stdout; docs/personaplex.md has the numbers and the command.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex bench kv-fidelity", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--frames", type=int, default=300, help="live frames per session (default: %(default)s)")
    parser.add_argument("--late", type=int, default=100,
                        help="the tick the third session joins at (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="weights, voices and user codes (default: %(default)s)")
    parser.add_argument("--out", type=pathlib.Path, help="also write the report here (default: none)")
    return parser


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.frames < 1 or args.late < 0:
        parser.error("--frames must be >= 1 and --late >= 0")
    import torch  # with the model, after parsing, so that `--help` needs no extra

    from liveplex.bench import kv_logits

    torch.set_num_threads(1)
    report = kv_logits.measure(args.frames, args.late, args.seed)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
