"""The layering of the developers' guide: the gateway, placement and the operator load no engine
code; no package imports one above it; the packages form no loop; the gateway's roles keep to their
own (its machines do no I/O, the pod link places nothing, placement dials no pod) and the hop's words
sit below everything."""

from __future__ import annotations

import ast
import graphlib
import pathlib
import subprocess
import sys

import pytest

import liveplex

ENGINE_SIDE = ("liveplex.engine_pod", "liveplex.personaplex", "liveplex.sim_pod", "liveplex.live.channel",
               "liveplex.live.caller_audio", "liveplex.live.outputs", "liveplex.live.submissions",
               "liveplex.live.by_hand", "liveplex.live.drive", "liveplex.live.runner", "liveplex.live.jitter",
               "liveplex.live.line", "liveplex.live.pulse", "torch")
PLATFORM_SIDE = ("liveplex.gateway.app", "liveplex.gateway.cli", "liveplex.placement", "liveplex.operator.cli",
                 "liveplex.operator.handlers")


def test_the_platform_side_imports_no_engine_module() -> None:
    probe = (f"import importlib, sys\nfor m in {PLATFORM_SIDE!r}: importlib.import_module(m)\n"
             f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({ENGINE_SIDE!r}))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.split() == []


def test_the_probe_sees_an_engine_module_when_one_is_loaded() -> None:
    probe = (f"import liveplex.pod.backend, sys\n"
             f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({ENGINE_SIDE!r}))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert "liveplex.live.channel" in loaded.stdout.split()


def _package_imports() -> dict[str, set[str]]:
    """Which top-level parts of `liveplex` (packages and modules) each one imports, read from the
    source (TYPE_CHECKING imports included: a loop of types is a loop of concepts)."""
    root = pathlib.Path(liveplex.__file__).parent
    parts = {p.stem for p in root.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()} - {"__init__"}
    edges: dict[str, set[str]] = {part: set() for part in parts}
    for path in root.rglob("*.py"):
        source = path.relative_to(root).parts[0].removesuffix(".py")
        if source == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                dotted = name.split(".")
                if dotted[0] == "liveplex" and len(dotted) > 1 and dotted[1] in parts and dotted[1] != source:
                    edges[source].add(dotted[1])
    return edges


FORBIDDEN = {
    "live": {"continuity", "gptlive", "pod", "sim_pod", "engine_pod"},
    "continuity": {"pod", "gateway", "sim_pod", "engine_pod"},
    "placement": {"bench", "gateway", "pod", "operator"},
    "gptlive": {"continuity", "pod", "gateway"},
    "personaplex": {"live", "engine_pod", "sim_pod"},
    "engine_pod": {"sim_pod", "pod", "gateway"},
    "sim_pod": {"engine_pod", "pod", "gateway"},
}
"""Arrows that would point up the layering (docs/README's layout): the live contract knows no blob
and no protocol; continuity no serving shell; placement no bench; the model no engine; one engine
not the other (the voice names live with the model)."""


def test_no_package_imports_one_above_it() -> None:
    edges = _package_imports()
    assert {(src, dst) for src, banned in FORBIDDEN.items() for dst in edges[src] & banned} == set()


def test_the_packages_import_each_other_without_a_loop() -> None:
    edges = _package_imports()
    graph = graphlib.TopologicalSorter(edges)
    graph.prepare()  # raises CycleError naming the loop


def test_the_layering_probes_see_an_arrow_and_a_loop_when_there_is_one() -> None:
    edges = {"live": {"continuity"}, "continuity": {"gptlive"}, "gptlive": {"live"}}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(edges).prepare()
    assert "continuity" in _package_imports()["sim_pod"]  # the reader sees real arrows


@pytest.mark.parametrize("modules, absent", [
    (("liveplex.sim_pod", "liveplex.serve"), ("torch",)),  # the sim pod: torch is the personaplex engine's
    # a WebRTC call's media stack (0.2 s of every start's CPU) comes with the first offer (`webrtc.route`)
    (("liveplex.serve", "liveplex.gateway.cli"), ("aiortc", "av")),
])
def test_a_start_loads_only_what_it_serves(modules: tuple[str, ...], absent: tuple[str, ...]) -> None:
    probe = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
             f"print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in {absent!r})))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.split() == []


# --- the gateway's roles (issue 33): each module's own imports, read from its source -----------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
MACHINES = ("liveplex.gateway.placing", "liveplex.gateway.moving", "liveplex.gateway.relaying",
            "liveplex.gptlive.server.passthrough")
"""The sans-I/O machines: no clock, socket, task or shell."""
IO = ("asyncio", "time", "socket", "httpx", "websockets", "redis")
SHELLS = ("liveplex.gateway.leg", "liveplex.gateway.pod_link", "liveplex.gateway.placer",
          "liveplex.gateway.backend", "liveplex.gateway.gateway", "liveplex.gptlive.server.native")
RULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(MACHINES, IO + SHELLS),
    # the pod link dials and talks to pods, and decides nothing about where sessions go
    "liveplex.gateway.pod_link": ("liveplex.gateway.placer", "liveplex.gateway.breaker", "liveplex.gateway.view",
                                  "liveplex.placement.client", *MACHINES, "liveplex.gateway.leg",
                                  "liveplex.gateway.backend"),
    # placement never talks to a pod
    "liveplex.gateway.placer": ("liveplex.gateway.pod_link", "liveplex.gateway.upstream", "httpx", "websockets",
                                *MACHINES, "liveplex.gateway.leg", "liveplex.gateway.backend"),
    # the hop's words, encoded and decoded in one place below pods and gateways alike
    "liveplex.gptlive.server.hop": ("liveplex",),
}
"""Module -> what it may not import (a name or any module under it)."""


def imports_of(module: str) -> set[str]:
    """The modules `module`'s source imports, at any depth of its code (`from a import b`: `a` and `a.b`)."""
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("module", sorted(RULES))
def test_each_role_imports_nothing_of_another(module: str) -> None:
    def under(name: str, forbidden: str) -> bool:
        return name == forbidden or name.startswith(forbidden + ".")
    broken = sorted(name for name in imports_of(module) for forbidden in RULES[module] if under(name, forbidden))
    assert broken == []


def test_the_import_reader_sees_an_import() -> None:
    assert "liveplex.gateway.pod_link" in imports_of("liveplex.gateway.leg")
    assert "asyncio" in imports_of("liveplex.gateway.leg")
