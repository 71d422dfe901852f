"""The core install (`pip install liveplex`, no extra) runs every command's `--help`, and a command
or a flag whose extra is missing says in one line which `pip install` to run (issue 41).

One process plays the core install for every command: in place of the path finder, one that finds
only the standard library's modules and the core dependencies' (read from liveplex's metadata, so
a new extra's packages are hidden too), and no module is imported before it. One process, not one
per command: each start costs a CPU-second, and the finder hides the same modules from all.
"""

from __future__ import annotations

import importlib.metadata
import json
import multiprocessing
import pickle
import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

from liveplex import cli
from liveplex.bench import audio, pool

PATHS = [(list(path), extra) for path, extra in cli.command_extras().items()]

RUN_ARGS: dict[tuple[str, ...], list[str]] = {
    ("personaplex", "make-tiny"): ["{tmp}/tiny"],
    ("operator", "run"): ["-A"],
}
"""The fewest arguments a command with an extra runs with (none for the others): `{tmp}` is a
fresh directory."""

FLAG_RUNS: list[tuple[list[str], str]] = [
    (["serve", "--engine", "personaplex", "--port", "0", "--admin-port", "0"], "personaplex"),
    (["fetch-model", "hf://org/repo", "--dest", "{tmp}/model"], "fetch"),
    (["up", "--kube"], "operator,emulator"),
    (["up", "--kube", "--wait", "1"], "operator,emulator"),
    (["bench", "duplex", "--plot", "{tmp}/levels.png"], "bench"),
    (["bench", "latency", "--plot", "{tmp}/latency.png"], "bench"),
    (["serve", "--idle-pause-s", "3", "--port", "0", "--admin-port", "0"], "pause"),
    (["gateway", "--redis-url", "redis://127.0.0.1:9", "--store-s3-bucket", "calls", "--port", "0",
      "--admin-port", "0"], "store-s3"),
]
"""Core commands whose flag needs an extra: the run says so before it starts."""


def _groups() -> set[tuple[str, ...]]:
    """Paths with subcommands under them: running one is running a subcommand."""
    return {tuple(path[:i]) for path, _ in PATHS for i in range(1, len(path))}


def _extra_runs() -> list[tuple[list[str], str]]:
    """Every command with an extra, with `RUN_ARGS`, then `FLAG_RUNS`."""
    groups = _groups()
    return [([*path, *RUN_ARGS.get(tuple(path), [])], extra) for path, extra in PATHS
            if extra is not None and tuple(path) not in groups] + FLAG_RUNS


def _core_modules() -> list[str]:
    """The top-level modules of liveplex's dependencies without extras, and of theirs."""
    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    core, todo = set(), ["liveplex"]
    while todo:
        name = todo.pop()
        if norm(name) in core:
            continue
        core.add(norm(name))
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return sorted(module for module, dists in importlib.metadata.packages_distributions().items()
                  if any(norm(d) in core for d in dists))


CORE_INSTALL = """
import contextlib, importlib.machinery, io, json, sys, sysconfig, traceback

core, runs = json.load(sys.stdin)
STDLIB = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})

class CoreInstall:
    '''Finds what the real finder does, but only the standard library's and the core's modules.'''

    @staticmethod
    def find_spec(name, path=None, target=None):
        top = name.partition(".")[0]
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if top in core or top in sys.stdlib_module_names or top in sys.modules:
            return spec
        # the standard library's own modules that `stdlib_module_names` leaves out (`_sysconfigdata_*`)
        origin = getattr(spec, "origin", None) or ""
        return spec if origin.startswith(STDLIB) and "site-packages" not in origin else None

    @staticmethod
    def invalidate_caches():
        importlib.machinery.PathFinder.invalidate_caches()

sys.meta_path[sys.meta_path.index(importlib.machinery.PathFinder)] = CoreInstall
for hidden in ("torch", "yaml", "soxr", "openai", "kopf", "aiortc"):  # or a run would do real work
    try:
        __import__(hidden)
    except ModuleNotFoundError:
        continue
    sys.exit(f"the core install still finds {hidden}")

from liveplex import cli

done = []
for argv in runs:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
        except BaseException:
            code = traceback.format_exc()
    done.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
json.dump(done, sys.stdout)
"""


@pytest.fixture(scope="module")
def core_install(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """`" ".join(argv)` (with `{tmp}`) -> its exit code (or traceback), stdout and stderr on the core install."""
    tmp = str(tmp_path_factory.mktemp("core"))
    runs = [" ".join([*path, "--help"]) for path, _ in PATHS] + [" ".join(argv) for argv, _ in _extra_runs()]
    argvs = [[word.replace("{tmp}", tmp) for word in run.split(" ")] for run in runs]
    done = subprocess.run([sys.executable, "-c", CORE_INSTALL], input=json.dumps([_core_modules(), argvs]),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(zip(runs, json.loads(done.stdout), strict=True))


@pytest.mark.parametrize("path", [path for path, _ in PATHS], ids=" ".join)
def test_every_command_s_help_runs_on_the_core_install(core_install: dict, path: list[str]) -> None:
    got = core_install[" ".join([*path, "--help"])]
    assert (got["code"], got["err"]) == (0, ""), got
    assert str(got["out"]).startswith("usage: liveplex " + " ".join(path))


@pytest.mark.parametrize("argv, extra", _extra_runs(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_missing_extra_is_one_line_naming_the_pip_install(core_install: dict, argv: list[str], extra: str) -> None:
    got = core_install[" ".join(argv)]
    assert got["code"] == cli.EXIT_MISSING_EXTRA and got["out"] == "", got
    lines = str(got["err"]).splitlines()
    assert len(lines) == 1 and lines[0].startswith("liveplex ") and " needs the " in lines[0], got
    assert lines[0].endswith(f": {cli.install_line((extra,))}"), got


def test_an_extra_with_a_package_installed_apart_names_both() -> None:
    assert cli.install_line(("pause",)) == "pip install 'liveplex[pause]' && pip install --no-deps silero-vad==6.2.3"
    assert cli.install_line(("bench",)) == "pip install 'liveplex[bench]'"


def test_every_command_names_a_real_extra_or_none() -> None:
    """A table entry must state its extra (`Command.extra` has no default); one named must exist."""
    extras = set(importlib.metadata.metadata("liveplex").get_all("Provides-Extra") or ())
    assert [(path, extra) for path, extra in PATHS if extra is not None and extra not in extras] == []
    assert {extra for _, extra in PATHS} >= {None, "check", "personaplex", "operator"}


@pytest.mark.parametrize("name, says", [
    ("soxr", "needs the bench extra (no module named 'soxr')"),
    ("soxr.cysoxr", "needs the bench extra (no module named 'soxr.cysoxr')"),
])
def test_needs_turns_a_missing_third_party_module_into_missing_extra(name: str, says: str) -> None:
    with pytest.raises(cli.MissingExtra) as missing, cli.needs("bench"):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    assert str(missing.value) == f"{says}: pip install 'liveplex[bench]'"


@pytest.mark.parametrize("name", ["liveplex.nothing", "xml.nothing", None])
def test_a_missing_liveplex_or_standard_module_is_a_bug_not_an_extra(name: str | None) -> None:
    with pytest.raises(ModuleNotFoundError), cli.needs("bench"):
        raise ModuleNotFoundError("gone", name=name)


def test_missing_extra_crosses_a_pipe_from_a_bench_worker() -> None:
    """A worker resampling without soxr: the parent raises the worker's MissingExtra, its one line."""
    parent, child = multiprocessing.Pipe()
    child.send(cli.MissingExtra(("bench",), "soxr"))
    with pytest.raises(cli.MissingExtra) as missing:
        pool._expect_ready(parent)
    assert missing.value.extras == ("bench",) and missing.value.module == "soxr"
    assert pickle.loads(pickle.dumps(missing.value)).args == missing.value.args


def test_only_a_wav_at_another_rate_needs_the_bench_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "soxr", None)  # not installed
    path = tmp_path / "8k.wav"
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(np.zeros(800, "<i2").tobytes())
    assert len(audio.read_wav(str(path), 8000)) == 800
    with pytest.raises(cli.MissingExtra, match=r"pip install 'liveplex\[bench\]'"):
        audio.read_wav(str(path), 24000)
