"""The gateway, placement and the operator load no engine code (the layering of the developers' guide)."""

from __future__ import annotations

import subprocess
import sys

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
