"""The README is what a newcomer acts on: it names every command, every extra a command needs (as
the CLI's own table has it), and every page of docs/, and points at nothing a clone lacks."""

from __future__ import annotations

import re
from pathlib import Path

from liveplex import cli

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_every_command_is_in_the_readme() -> None:
    missing = [" ".join(path) for path in cli.command_paths() if f"liveplex {' '.join(path)}" not in README]
    assert missing == []


def test_every_doc_page_is_in_the_readmes_index() -> None:
    pages = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))
    assert [p for p in pages if f"`{p}`" not in README] == []


def test_the_extras_table_is_the_clis() -> None:
    """Each row of the README's extras table lists the commands that need that extra in the CLI's
    table (a command that needs it for one engine or source only is named with that flag)."""
    rows = dict(re.findall(r"^\| `(\w+)` \| .*? \| (.*?) \|$", README, re.MULTILINE))
    for path, extra in cli.command_extras().items():
        if extra is not None:
            assert f"`{' '.join(path)}" in rows.get(extra, ""), (path, extra)


def test_nothing_points_outside_the_clone() -> None:
    texts = [README, *(p.read_text() for p in (REPO / "docs").rglob("*.md"))]
    assert [t for t in texts if "../shared" in t or "beside the project" in t] == []


def test_an_example_outside_default_says_how_to_make_its_namespace() -> None:
    """`kubectl apply -f` of a LiveEngine in a namespace that does not exist is refused: the header
    a user copies its commands from must create it first."""
    for example in sorted((REPO / "examples").glob("*.yaml")):
        text = example.read_text()
        namespace = re.search(r"^  namespace: (\S+)$", text, re.MULTILINE)
        assert namespace is not None, example
        if namespace[1] != "default":
            header = text.split("\napiVersion:", 1)[0]
            assert f"kubectl create namespace {namespace[1]}" in header, example.name
