"""`liveplex personaplex`: model tools. `make-tiny DIR` writes a random checkpoint directory in the
real layout (`tiny_checkpoint`), so that the whole path runs on a laptop without the real weights.
"""

from __future__ import annotations

import argparse
import pathlib
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liveplex personaplex", description="PersonaPlex model tools")
    sub = parser.add_subparsers(dest="command", required=True)
    says = "write a random tiny checkpoint directory in the real layout"
    tiny = sub.add_parser("make-tiny", help=says, description=says)
    tiny.add_argument("directory", type=pathlib.Path)
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--moshi", action="store_true", help="Kyutai Moshi's layout: 8 depformer steps, no voices")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "make-tiny":
        from liveplex.personaplex import prompt, tiny_checkpoint  # torch: after parsing, so `--help` needs no extra

        convention = prompt.Convention.MOSHI if args.moshi else prompt.Convention.PERSONAPLEX
        tiny_checkpoint.make_tiny(args.directory, args.seed, convention)
        print(f"wrote a tiny {'Moshi' if args.moshi else 'PersonaPlex'} checkpoint to {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
