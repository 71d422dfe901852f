"""`liveplex up --kube`'s kubeconfig is its ready signal: it appears only once a LiveEngine can be
applied, so a script that applies one the moment the file exists (or after `up --kube --wait`)
never races the CRD's install; and the kubeconfig and the emulator's state stay out of the
working directory (a checkout), under `$XDG_STATE_HOME/liveplex`, saying where."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import pods

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "liveengine-sim.yaml"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
"""This checkout's liveplex, whatever the working directory."""


def _up(tmp: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    cwd = tmp / "checkout"
    cwd.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "liveplex.cli", "up", "--kube", *flags],
                            stdout=subprocess.PIPE, stderr=open(tmp / "up.log", "wb"), cwd=cwd,  # noqa: SIM115
                            env={**ENV, **(env or {})})


def _apply(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", str(EXAMPLE)],
                          capture_output=True, text=True, timeout=60)


def test_a_liveengine_applied_the_moment_the_kubeconfig_appears_is_created(redis_url: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = _up(tmp_path, "--port", str(pods.free_port()), "--redis-url", redis_url,
               "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp_path / "state"))
    try:
        end = time.monotonic() + 90
        while not kubeconfig.exists():
            assert proc.poll() is None and time.monotonic() < end, (tmp_path / "up.log").read_text()
            time.sleep(0.005)
        applied = _apply(kubeconfig)
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.strip() == "liveengine.live.liveplex.io/sim created"
    finally:
        pods.interrupt(proc, 30)
    assert not kubeconfig.exists()  # it names a server that is gone: removed with it


def test_up_kube_keeps_its_files_out_of_the_checkout_and_wait_says_where(redis_url: str, tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "xdg")}
    state = tmp_path / "xdg" / "liveplex"
    proc = _up(tmp_path, "--port", str(pods.free_port()), "--redis-url", redis_url, env=env)
    try:
        waited = subprocess.run([sys.executable, "-m", "liveplex.cli", "up", "--kube", "--wait"], capture_output=True,
                                text=True, timeout=120, env={**ENV, **env})
        assert waited.returncode == 0, (waited.stderr, (tmp_path / "up.log").read_text())
        assert waited.stdout.strip() == str(state / "kubeconfig")
        assert _apply(state / "kubeconfig").returncode == 0
        assert proc.stdout is not None
        banner = [proc.stdout.readline().decode()]
        while banner[-1] and not banner[-1].startswith("Ctrl-C"):
            banner.append(proc.stdout.readline().decode())
        said = "".join(banner)
        assert f"kubeconfig {state / 'kubeconfig'}" in said and f"emulator state {state / 'emulator'}" in said, said
        [gateway] = [line for line in banner if line.strip().startswith("gateway")]
        admin = gateway.rsplit("admin ", 1)[1].strip()
        with urllib.request.urlopen(admin + "/metrics", timeout=5) as metrics:  # the move counter's page
            assert b"liveplex_gateway_session_moves_total" in metrics.read()
        assert (state / "emulator").is_dir()
        assert list((tmp_path / "checkout").iterdir()) == []
    finally:
        pods.interrupt(proc, 30)


def test_wait_with_nothing_coming_gives_up_saying_what_it_waited_for(tmp_path: Path) -> None:
    waited = subprocess.run([sys.executable, "-m", "liveplex.cli", "up", "--kube", "--wait", "0.5", "--kubeconfig",
                             str(tmp_path / "none")], capture_output=True, text=True, timeout=60, env=ENV)
    assert waited.returncode == 1 and f"no `liveplex up --kube` was ready at {tmp_path / 'none'}" in waited.stderr
