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
        for module, _ in commands.values():
            assert callable(importlib.import_module(module).main)
