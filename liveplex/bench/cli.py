"""`liveplex bench SUBCOMMAND`: each subcommand is a module with `main(argv) -> int`, imported
lazily so that, for example, `bench duplex` never imports torch."""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "duplex": ("liveplex.bench.duplex", "N real-time GPT-Live callers against a server, or a ramp"),
    "baseline": ("liveplex.bench.baseline", "bare websockets echo server: the pod's physical limit"),
    "engine": ("liveplex.bench.engine", "PersonaPlex engine ticks without the front end"),
}


def _usage() -> str:
    lines = ["usage: liveplex bench SUBCOMMAND [options]", "", "subcommands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Dispatch to the subcommand's module."""
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] not in SUBCOMMANDS:
        print(f"liveplex bench: unknown subcommand {argv[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[argv[0]][0])
    return int(module.main(argv[1:]) or 0)
