"""The `liveplex` command: one word per component, each parsed by the component itself.

Subcommands are imported lazily so that `liveplex serve` with the sim engine never imports torch,
and a component's flags live next to the component.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module with `main(argv: list[str]) -> int`, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("liveplex.serve", "run a pod: the GPT-Live front end over an engine (sim by default)"),
    "check": ("liveplex.conformance.cli", "check a GPT-Live server against the conformance checklist"),
    "bench": ("liveplex.bench.cli", "benchmarks: `bench duplex`, `bench baseline`, `bench engine`"),
    "personaplex": ("liveplex.personaplex.cli", "PersonaPlex model tools, e.g. `make-tiny DIR`"),
}


def _usage() -> str:
    lines = ["usage: liveplex COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<12} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "`liveplex COMMAND --help` shows a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    if args[0] not in COMMANDS:
        print(f"liveplex: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[args[0]][0])
    return int(module.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
