"""The `liveplex` command: one word per component, each parsed by the component itself.

Subcommands are imported lazily so that `liveplex serve` with the sim engine never imports torch,
and a component's flags live next to the component. `dispatch` is shared with command groups such
as `liveplex bench`.

Every command runs its `--help` on the core install (`pip install liveplex`): a command's module
imports only the core's packages, and what an extra brings is imported after parsing. `COMMANDS`
(and a group's own table) says which extra a command cannot start without; a flag that needs one
(`serve --engine personaplex`, `up --kube`) says so where it imports it, with `needs`. Either way a
missing extra is one line naming the `pip install` to run (`MissingExtra`), printed by `dispatch`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Iterator, Mapping
from typing import NamedTuple

from liveplex import __version__


class Command(NamedTuple):
    module: str
    """Its module: `main(argv: list[str]) -> int` and `build_parser()`, or a group's `SUBCOMMANDS`."""
    help: str
    """One line for the usage."""
    extra: str | None
    """The extra it cannot start without (`pip install 'liveplex[EXTRA]'`); None: the core install runs it."""


Commands = Mapping[str, Command]

COMMANDS: Commands = {
    "serve": Command("liveplex.serve", "run a pod: the GPT-Live front end over an engine (sim by default)", None),
    "gateway": Command("liveplex.gateway.cli", "run a gateway: one GPT-Live endpoint placing sessions on pods",
                       None),
    "up": Command("liveplex.up", "the local platform in one command: Redis, pods and a gateway", None),
    "check": Command("liveplex.conformance.cli", "check a GPT-Live server against the conformance checklist",
                     "check"),
    "bench": Command("liveplex.bench.cli", "benchmarks: `bench duplex`, `bench baseline`, `bench engine`", None),
    "personaplex": Command("liveplex.personaplex.cli", "PersonaPlex model tools, e.g. `make-tiny DIR`",
                           "personaplex"),
    "fetch-model": Command("liveplex.fetch_model",
                           "download a checkpoint into a volume, once (engine pods' init container)", None),
    "operator": Command("liveplex.operator.cli",
                        "the LiveEngine operator: `operator crd`, `operator run -n NS | -A`", "operator"),
}

EXIT_MISSING_EXTRA = 2
"""A command refused before it starts, like a bad flag."""


INSTALLED_APART: Mapping[str, tuple[str, ...]] = {"pause": ("silero-vad==6.2.3",)}
"""What an extra needs installed after it with `pip install --no-deps`: a package whose declared
dependencies would replace a pin (Silero VAD declares torch; the idle pause uses only its ONNX file,
docs/pause.md). The one owner of those requirements: the missing-extra line, scripts/test and the
images (scripts/build-images) read them here."""


def installed_apart(extras: tuple[str, ...]) -> tuple[str, ...]:
    """The requirements `extras` need installed apart, without their dependencies (`INSTALLED_APART`)."""
    return tuple(r for e in extras for r in INSTALLED_APART.get(e, ()))


def install_line(extras: tuple[str, ...]) -> str:
    """The shell line that installs `extras` and what they need apart (`installed_apart`)."""
    apart = installed_apart(extras)
    return " && ".join([f"pip install 'liveplex[{','.join(extras)}]'",
                        *([f"pip install --no-deps {' '.join(apart)}"] if apart else [])])


class MissingExtra(Exception):
    """A module that an extra brings is not installed: `dispatch` prints this as the command's one line."""

    def __init__(self, extras: tuple[str, ...], module: str) -> None:
        super().__init__(extras, module)  # the arguments, so that it pickles (a bench worker sends it back)
        self.extras, self.module = extras, module

    def __str__(self) -> str:
        which = f"the {' and '.join(self.extras)} extra" + ("s" if len(self.extras) > 1 else "")
        return f"needs {which} (no module named {self.module!r}): {install_line(self.extras)}"


@contextlib.contextmanager
def needs(*extras: str) -> Iterator[None]:
    """Turn a third-party module missing inside the block into `MissingExtra(extras)`. A missing
    liveplex or standard-library module is a bug, not an extra to install: it goes on as it is."""
    try:
        yield
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        if not top or top == "liveplex" or top in sys.stdlib_module_names:
            raise
        raise MissingExtra(extras, exc.name or top) from None


def _usage(prog: str, commands: Commands) -> str:
    lines = [f"usage: {prog} COMMAND [options]", "", "commands:"]
    lines += [f"  {name:<12} {c.help}" + (f" [{c.extra}]" if c.extra else "") for name, c in commands.items()]
    lines += ["", f"`{prog} COMMAND --help` shows a command's options; `{prog} --version` the version;",
              "[EXTRA]: the command needs `pip install 'liveplex[EXTRA]'`."]
    return "\n".join(lines)


def dispatch(prog: str, commands: Commands, argv: list[str]) -> int:
    """Run `argv[0]`'s module with the rest of `argv`; usage on no or an unknown command; one line
    and `EXIT_MISSING_EXTRA` when an extra it needs is missing."""
    if argv[:1] in (["--version"], ["-V"]):  # what an image's label and a bug report quote
        print(f"liveplex {__version__}")
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(prog, commands))
        return 0 if argv else 2
    if argv[0] not in commands:
        print(f"{prog}: unknown command {argv[0]!r}\n\n{_usage(prog, commands)}", file=sys.stderr)
        return 2
    command = commands[argv[0]]
    try:
        with needs(command.extra) if command.extra else contextlib.nullcontext():
            module = importlib.import_module(command.module)
            return int(module.main(argv[1:]) or 0)
    except MissingExtra as exc:
        print(f"{prog} {argv[0]}: {exc}", file=sys.stderr)
        return EXIT_MISSING_EXTRA


def command_extras(commands: Commands = COMMANDS, words: tuple[str, ...] = ()) -> dict[tuple[str, ...], str | None]:
    """Every command, group and subcommand as the words after `liveplex` (`("bench", "duplex")`,
    `("operator", "crd")`), with the extra it needs. Imports every command's module, as the core
    install can; a group's module has `SUBCOMMANDS`, any other's parser may have subcommands."""
    extras: dict[tuple[str, ...], str | None] = {}
    for name, command in commands.items():
        path = (*words, name)
        extras[path] = command.extra
        module = importlib.import_module(command.module)
        group: Commands | None = getattr(module, "SUBCOMMANDS", None)
        if group is not None:
            extras |= command_extras(group, path)
            continue
        parser: argparse.ArgumentParser = module.build_parser()
        extras |= {(*path, sub): command.extra for action in parser._actions
                   if isinstance(action, argparse._SubParsersAction) for sub in action.choices}
    return extras


def command_paths() -> list[list[str]]:
    """`command_extras`' paths: what a test runs `liveplex PATH --help` of on the core install."""
    return [list(path) for path in command_extras()]


def main(argv: list[str] | None = None) -> int:
    return dispatch("liveplex", COMMANDS, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
