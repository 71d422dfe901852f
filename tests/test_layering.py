"""The gateway, placement and the operator load no engine code (the layering of the developers' guide);
the gateway's roles keep to their own (its machines do no I/O, the pod link places nothing, placement
dials no pod) and the hop's words sit below everything."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

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
