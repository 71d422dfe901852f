"""Real containers for tests: the project's images built by `scripts/build-images` on a cached
debootstrap base, run with podman as a kubelet would run a hardened pod (non-root, read-only root,
no capabilities, writes only to mounted emptyDir stand-ins), on a loopback address of their own.

This machine's container settings live here, not in the build script: vfs storage, chroot build
isolation, runc with cgroupfs (crun refuses this box's cgroups) and ulimits under the box's hard
limit (podman's defaults exceed it). An environment that sets them differently wins.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TAG = "test"
TOOLS = ("buildah", "podman", "runc", "debootstrap")
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""
UID = 65532
EMPTY_DIRS = ("/tmp", "/var/cache/liveplex")
"""What the images write to; pods mount emptyDirs there (liveplex.operator.render)."""
READY_S = 120.0


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def environment(state: Path) -> dict[str, str]:
    """The environment build-images and podman run in (this machine's settings, see above)."""
    conf = state / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    env = dict(os.environ)
    env.setdefault("STORAGE_DRIVER", "vfs")
    env.setdefault("BUILDAH_ISOLATION", "chroot")
    env.setdefault("CONTAINERS_CONF", str(conf))
    env.setdefault("PYTHON", sys.executable)
    return env


def podman(env: dict[str, str], *args: str, check: bool = True,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], env=env, capture_output=True, text=True, check=check, timeout=timeout)


def build(env: dict[str, str], *flags: str) -> None:
    """`scripts/build-images --debian-base --tag test FLAGS`; the output is shown on failure."""
    proc = subprocess.run([str(REPO / "scripts" / "build-images"), "--debian-base", "--tag", TAG, *flags],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"build-images {' '.join(flags)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def image(name: str) -> str:
    return f"localhost/{name}:{TAG}"


def pod_address() -> tuple[str, int]:
    """A free `127.x.y.z` address (never 127.0.0.1) and port, as the emulator's kubelet gives pods."""
    while True:
        host = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
        with socket.socket() as s:
            try:
                s.bind((host, 0))
            except OSError:
                continue
            return host, s.getsockname()[1]


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    host: str
    port: int

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"


def hardened_flags(empty_dirs: Path) -> list[str]:
    """`podman run` flags for a pod under the restricted profile: uid/gid 65532, read-only root,
    no capabilities, no privilege escalation, emptyDirs (host folders) where the image writes."""
    flags = ["--user", f"{UID}:{UID}", "--read-only", "--read-only-tmpfs=false", "--cap-drop", "ALL",
             "--security-opt", "no-new-privileges", "--network", "host"]
    for target in EMPTY_DIRS:
        source = empty_dirs / target.strip("/").replace("/", "-")
        source.mkdir(parents=True, exist_ok=True)
        os.chown(source, UID, UID)
        flags += ["-v", f"{source}:{target}"]
    return flags


def wait_ready(env: dict[str, str], container: Container) -> None:
    """Until the pod's `/ready` answers 200; the container's logs on failure."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://{container.host}:{container.port}/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        state = podman(env, "inspect", "--format", "{{.State.Running}}", container.name, check=False)
        if state.stdout.strip() == "false":
            break
        time.sleep(0.5)
    logs = podman(env, "logs", container.name, check=False)
    raise RuntimeError(f"{container.name} did not turn ready:\n{logs.stdout[-4000:]}{logs.stderr[-4000:]}")


def live_config(container: Container) -> dict[str, Any]:
    """The pod's `/live/config`: what it serves, `pauses` among it (docs/pause.md)."""
    with urllib.request.urlopen(f"http://{container.host}:{container.port}/live/config", timeout=5) as r:
        return json.loads(r.read())


PAUSE_FLAGS = ["--idle-pause-s", "60"]
"""The idle pause on (a pod without the pause extra exits 2), long enough that no session of a test
call pauses: the detector still hears every caller frame, in the image, under the hardened flags."""


@contextlib.contextmanager
def running(env: dict[str, str], image_ref: str, args: list[str], *, host: str, port: int, flags: list[str],
            name: str) -> Iterator[Container]:
    """A detached container; removed (SIGINT, then forced) however the block ends."""
    podman(env, "rm", "-f", name, check=False)
    podman(env, "run", "-d", "--name", name, "--stop-signal", "SIGINT", *flags, image_ref, *args)
    try:
        yield Container(name, host, port)
    finally:
        podman(env, "rm", "-f", "-t", "5", name, check=False)
