"""The `liveplex` command's dispatch: usage, unknown words, and a subcommand group."""

from __future__ import annotations

import pytest

from liveplex import cli
from liveplex.bench import cli as bench_cli


def test_no_command_prints_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    out = capsys.readouterr().out
    assert all(name in out for name in cli.COMMANDS)


def test_help_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "usage: liveplex COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_package_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata
    assert cli.main([flag]) == 0
    assert capsys.readouterr().out == f"liveplex {importlib.metadata.version('liveplex')}\n"


def test_an_unknown_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err


def test_bench_group_lists_its_subcommands_and_refuses_others(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in bench_cli.SUBCOMMANDS)
    assert cli.main(["bench", "nope"]) == 2
    assert "liveplex bench: unknown command 'nope'" in capsys.readouterr().err


def test_every_command_module_has_a_main() -> None:
    import importlib
    for commands in (cli.COMMANDS, bench_cli.SUBCOMMANDS):
        for command in commands.values():
            assert callable(importlib.import_module(command.module).main)


def test_a_group_advertises_only_what_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """`liveplex bench --help` names `liveplex bench --version`: it answers."""
    assert cli.main(["bench", "--help"]) == 0
    assert "`liveplex bench --version` the version" in capsys.readouterr().out
    assert cli.main(["bench", "--version"]) == 0
    assert capsys.readouterr().out.startswith("liveplex ")


def test_every_subcommand_has_a_description() -> None:
    """`liveplex operator crd --help` says what `crd` does, as `liveplex operator --help` lists it."""
    import argparse
    import importlib
    subs = {(command.module, name): sub.description for command in cli.COMMANDS.values()
            if hasattr(module := importlib.import_module(command.module), "build_parser")
            for action in module.build_parser()._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}
    assert ("liveplex.operator.cli", "crd") in subs
    assert [key for key, description in subs.items() if not description] == []


def test_the_webrtc_flags_say_once_that_they_need_the_webrtc_extra() -> None:
    from liveplex import serve
    groups = [group for group in serve.build_parser()._action_groups
              if any(flag.startswith("--webrtc-") for action in group._group_actions for flag in action.option_strings)]
    assert len(groups) == 1
    said = f"{groups[0].title} {groups[0].description}"
    assert said.count("pip install 'liveplex[webrtc]'") == 1
    assert all(flag.startswith("--webrtc-") for action in groups[0]._group_actions for flag in action.option_strings)


def _parsers() -> list:
    """The parsers of `serve`, `gateway`, `up` and every `bench` subcommand."""
    from liveplex import serve, up
    from liveplex.bench import baseline, duplex, engine, place
    from liveplex.gateway import cli as gateway_cli
    return [serve.build_parser(), gateway_cli.build_parser(), up.build_parser(),
            baseline.build_parser(), duplex.build_parser(), engine.build_parser(), place.build_parser()]


def test_every_serve_gateway_up_and_bench_flag_says_what_it_does_and_its_default() -> None:
    missing = [f"{parser.prog} {action.option_strings[0]}" for parser in _parsers() for action in parser._actions
               if action.option_strings and action.dest != "help"
               and not action.required and "default" not in (action.help or "")]
    assert missing == []
