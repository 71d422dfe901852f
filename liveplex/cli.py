"""The `liveplex` command: one word per component, each parsed by the component itself.

Subcommands are imported lazily so that `liveplex serve` with the sim engine never imports torch,
and a component's flags live next to the component. `dispatch` is shared with command groups such
as `liveplex bench`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping

from liveplex import __version__

Commands = Mapping[str, tuple[str, str]]
"""name -> (module with `main(argv: list[str]) -> int`, one-line help)."""

COMMANDS: Commands = {
    "serve": ("liveplex.serve", "run a pod: the GPT-Live front end over an engine (sim by default)"),
    "gateway": ("liveplex.gateway.cli", "run a gateway: one GPT-Live endpoint placing sessions on pods"),
    "up": ("liveplex.up", "the local platform in one command: Redis, pods and a gateway"),
    "check": ("liveplex.conformance.cli", "check a GPT-Live server against the conformance checklist"),
    "bench": ("liveplex.bench.cli", "benchmarks: `bench duplex`, `bench baseline`, `bench engine`"),
    "personaplex": ("liveplex.personaplex.cli", "PersonaPlex model tools, e.g. `make-tiny DIR`"),
    "fetch-model": ("liveplex.fetch_model", "download a checkpoint into a volume, once (engine pods' init container)"),
    "operator": ("liveplex.operator.cli", "the LiveEngine operator: `operator crd`, `operator run -n NS | -A`"),
}


def _usage(prog: str, commands: Commands) -> str:
    lines = [f"usage: {prog} COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<12} {help_}" for name, (_, help_) in commands.items()]
    lines += ["", f"`{prog} COMMAND --help` shows a command's options; `{prog} --version` the version."]
    return "\n".join(lines)


def dispatch(prog: str, commands: Commands, argv: list[str]) -> int:
    """Run `argv[0]`'s module with the rest of `argv`; usage on no or an unknown command."""
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(prog, commands))
        return 0 if argv else 2
    if argv[0] not in commands:
        print(f"{prog}: unknown command {argv[0]!r}\n\n{_usage(prog, commands)}", file=sys.stderr)
        return 2
    module = importlib.import_module(commands[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--version"], ["-V"]):  # what an image's label and a bug report quote
        print(f"liveplex {__version__}")
        return 0
    return dispatch("liveplex", COMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
