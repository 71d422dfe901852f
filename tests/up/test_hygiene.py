"""Every command that starts processes leaves none behind: `liveplex up` (both modes) started as a
background job the way a shell starts one (SIGINT and SIGQUIT ignored), stopped with SIGINT or
SIGTERM, takes Redis, the pods, the gateway, the emulator, the operator and the emulator's pods
with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import platform, pods
from tests.up.test_kube import ENGINE, Kube

pytestmark = pytest.mark.timeout(240)


def _started_at(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat), None once it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]


def descendants(root: int) -> dict[int, str]:
    """Every live process under `root` (by parent pid), with its start time."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found: dict[int, str] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        started = _started_at(pid)
        if started is not None:
            found[pid] = started
        todo += children.get(pid, ())
    return found


def _ignore_interrupts() -> None:
    """What a non-interactive shell does to a background job (`cmd &`) before it execs."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def background(args: list[str], cwd: Path, log: Path) -> tuple[subprocess.Popen[bytes], threading.Event]:
    """`liveplex ARGS &`; the event is set once it says it is up."""
    proc = subprocess.Popen([sys.executable, "-m", "liveplex.cli", *args], stdout=subprocess.PIPE,
                            stderr=open(log, "wb"), cwd=cwd, preexec_fn=_ignore_interrupts,  # noqa: SIM115
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ready = threading.Event()

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if b"Ctrl-C stops everything" in line:
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    return proc, ready


def stop_and_find_none_left(proc: subprocess.Popen[bytes], tree: dict[int, str], sig: signal.Signals) -> None:
    proc.send_signal(sig)
    try:
        proc.wait(60)
    finally:
        left = {pid for pid, started in tree.items() if _started_at(pid) == started}
        for pid in left:  # never leave them to the next test
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    assert not left, f"{len(left)} of {len(tree)} processes outlived `liveplex up` on {sig.name}"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_up_in_the_background_stops_redis_the_pods_and_the_gateway(tmp_path: Path, sig: signal.Signals) -> None:
    proc, ready = background(["up", "--pods", "2", "--port", str(pods.free_port())], tmp_path, tmp_path / "up.log")
    assert ready.wait(90) and proc.poll() is None, (tmp_path / "up.log").read_text()
    tree = descendants(proc.pid)
    assert len(tree) >= 4, tree  # redis-server, two pods, the gateway
    stop_and_find_none_left(proc, tree, sig)
    assert proc.returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_up_kube_in_the_background_stops_the_emulators_pods_too(redis_url: str, tmp_path: Path,
                                                               sig: signal.Signals) -> None:
    port, kubeconfig = pods.free_port(), tmp_path / "kubeconfig"
    proc, ready = background(["up", "--kube", "--port", str(port), "--redis-url", redis_url, "--kubeconfig",
                              str(kubeconfig), "--state-dir", str(tmp_path / "state")], tmp_path, tmp_path / "up.log")
    assert ready.wait(90) and proc.poll() is None, (tmp_path / "up.log").read_text()
    kube = Kube(kubeconfig, f"127.0.0.1:{port}")
    kube.kubectl("apply", "-f", "-", stdin=ENGINE.format(name="sim", replicas=2, jitter=4))
    platform.eventually(lambda: len(kube.ready_pods("sim")) == 2, "two ready sim pods", 90)
    tree = descendants(proc.pid)
    serving = [pid for pid in tree if b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(serving) == 2, tree  # the pods run as processes of the emulator's kubelet
    stop_and_find_none_left(proc, tree, sig)


def test_a_second_ctrl_c_kills_the_pods_before_their_redis_stops(tmp_path: Path) -> None:
    """Two Ctrl-Cs in a row: the second hurries the stop (kills), but never unwinds past it, so
    Redis is not stopped under pods still heartbeating to it (they would log warnings)."""
    log = tmp_path / "up.log"
    proc, ready = background(["up", "--pods", "2", "--port", str(pods.free_port())], tmp_path, log)
    assert ready.wait(90) and proc.poll() is None, log.read_text()
    tree = descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)  # the pods have begun to drain
    stop_and_find_none_left(proc, tree, signal.SIGINT)
    assert proc.returncode == 0
    said = log.read_text()
    assert "Traceback" not in said and '"level": "warning"' not in said, said
