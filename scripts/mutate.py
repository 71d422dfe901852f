"""The suite's mutation check: plant one deliberate bug, run the tests that should catch it.

    python scripts/mutate.py                          # every mutation in scripts/mutations.toml
    python scripts/mutate.py drive-lateness-zero      # the named ones only
    python scripts/mutate.py --tests-from main        # the same bugs against main's tests
    python scripts/mutate.py --file liveplex/live/jitter.py --old 'excess > 0' --new 'excess > 1' \
        --tests tests/live/test_jitter.py             # an ad-hoc mutation

Each mutation replaces one exact text (it must occur once) in a copy of the worktree, in a
temporary directory, so the checkout is never touched and an interrupted run leaves nothing
behind. The named tests run in the copy first unmutated (they must pass), then mutated: a failing
run is CAUGHT (the first failing test is shown), a passing one MISSED. With `--tests-from`, test
files that revision lacks are left out (NO-TESTS when none is left). Not part of CI: it runs the
same tests twice per mutation. Exit status 1 unless every mutation was caught.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "scripts" / "mutations.toml"
PYTEST_FLAGS = ("-x", "-q", "-p", "no:cacheprovider", "--no-header")


@dataclass(frozen=True, slots=True)
class Mutation:
    """One textual bug: `old` replaced by `new` in `file`, to be caught by `tests`."""

    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str = ""


def load(path: Path) -> list[Mutation]:
    with path.open("rb") as f:
        rows = tomllib.load(f)["mutation"]
    return [Mutation(r["name"], r["file"], r["old"], r["new"], tuple(r["tests"]), r.get("why", ""))
            for r in rows]


def copy_tree(dest: Path, tests_from: str | None) -> None:
    """The worktree's files (tracked and untracked, not ignored) into `dest`; `tests/` from a
    revision instead when asked."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    if tests_from is not None:
        shutil.rmtree(dest / "tests")
        archive = subprocess.run(["git", "archive", tests_from, "tests"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


NOT_FOUND = (4, 5)
"""pytest's exit codes for a usage error (a test path not found) and for no tests collected."""


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[int, str]:
    """pytest's exit code in `tree`, and its first failure (or its last line)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_TORCH_COMPILE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_FLAGS, *tests], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 1, f"timed out after {timeout_s:.0f} s"
    lines = (done.stdout + done.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return done.returncode, (failed or lines or [""])[0 if failed else -1]


def imports_from(tree: Path) -> None:
    """Refuse to run when `liveplex` would be imported from anywhere but the copy."""
    where = subprocess.run([sys.executable, "-c", "import liveplex; print(liveplex.__file__)"], cwd=tree,
                           env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
                           check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"liveplex imports from {where}, not from the copy {tree}")


def check(m: Mutation, tests_from: str | None, timeout_s: float) -> tuple[str, str]:
    """(verdict, detail) for one mutation: CAUGHT, MISSED, or why it could not be judged."""
    with tempfile.TemporaryDirectory(prefix="liveplex-mutate-") as tmp:
        tree = Path(tmp)
        copy_tree(tree, tests_from)
        imports_from(tree)
        target = tree / m.file
        text = target.read_text()
        if text.count(m.old) != 1:
            return "BAD", f"{m.old!r} occurs {text.count(m.old)} times in {m.file}, not once"
        tests = tuple(t for t in m.tests if (tree / t.split("::")[0]).exists())
        if not tests:
            return "NO-TESTS", f"none of {', '.join(m.tests)} exists"
        code, tail = run_tests(tree, tests, timeout_s)
        if code != 0:
            return "BASELINE-FAILS", tail
        target.write_text(text.replace(m.old, m.new))
        code, tail = run_tests(tree, tests, timeout_s)
        if code in NOT_FOUND:
            return "NO-TESTS", tail
        return ("MISSED" if code == 0 else "CAUGHT"), tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutations of the catalogue to run (default: all)")
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE)
    parser.add_argument("--tests-from", metavar="REV", help="run tests/ as of this git revision")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per test run")
    parser.add_argument("--file", help="ad hoc: the module to mutate, relative to the repository")
    parser.add_argument("--old", help="ad hoc: the exact text to replace")
    parser.add_argument("--new", help="ad hoc: its replacement")
    parser.add_argument("--tests", nargs="+", help="ad hoc: pytest paths or node ids")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the temporary copy is removed
    if args.file:
        if not (args.old and args.new is not None and args.tests):
            parser.error("--file needs --old, --new and --tests")
        mutations = [Mutation("ad-hoc", args.file, args.old, args.new, tuple(args.tests))]
    else:
        mutations = load(args.catalogue)
        unknown = set(args.names) - {m.name for m in mutations}
        if unknown:
            parser.error(f"not in {args.catalogue.name}: {', '.join(sorted(unknown))}")
        mutations = [m for m in mutations if not args.names or m.name in args.names]
    width = max(len(m.name) for m in mutations)
    failed = 0
    for m in mutations:
        verdict, detail = check(m, args.tests_from, args.timeout)
        failed += verdict != "CAUGHT"
        print(f"{m.name:<{width}}  {verdict:<14}  {m.file}  ({detail})", flush=True)
    print(f"{len(mutations) - failed}/{len(mutations)} caught")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
