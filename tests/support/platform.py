"""The platform for tests: sim pods in one pool and a gateway in front, all real subprocesses
over the session's real redis-server."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support import pods

POOL = "test/pool"


def get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def eventually(check: Callable[[], bool], what: str, deadline_s: float = 15.0) -> None:
    """Wait for an outside process to reach a state (a pod's heartbeat, a gateway's refresh),
    failing fast with `what` at the deadline."""
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Platform:
    gateway: pods.Running
    pods: list[tuple[pods.Running, subprocess.Popen[bytes]]]
    gateway_process: subprocess.Popen[bytes]

    def stats(self) -> dict:
        return get_json(self.gateway.admin_root + "/live/stats")  # type: ignore[return-value]

    def pod_sessions(self) -> list[int]:
        return [get_json(p.admin_root + "/live/stats")["sessions"] for p, _ in self.pods]  # type: ignore[index]


@contextlib.contextmanager
def pod(redis_url: str | None, tmp: Path, index: int,
        flags: tuple[str, ...] = ()) -> Iterator[tuple[pods.Running, subprocess.Popen[bytes]]]:
    """Sim pod `pod-INDEX` in `POOL` (one more, for a platform already running: a rollout's new pod)."""
    where = ("--redis-url", redis_url) if redis_url is not None else ()
    with pods.subprocess_pod(*where, "--pool", POOL, "--pod-name", f"pod-{index}", *flags,
                             log=tmp / f"pod-{index}.log") as running:
        yield running


@contextlib.contextmanager
def platform(redis_url: str | None, tmp: Path, n_pods: int = 2, pod_flags: tuple[str, ...] = (),
             gateway_flags: tuple[str, ...] = (), each_pod: Sequence[tuple[str, ...]] = ()) -> Iterator[Platform]:
    """`n_pods` sim pods in `POOL` and a gateway with `--pool POOL`, once the gateway sees them all.
    `redis_url` None: they find Redis in the environment (`$LIVEPLEX_REDIS_URL`), as in a cluster.
    `each_pod[i]`: flags for pod i alone, after `pod_flags`."""
    where = ("--redis-url", redis_url) if redis_url is not None else ()
    with contextlib.ExitStack() as stack:
        running = []
        for i in range(n_pods):
            own = each_pod[i] if i < len(each_pod) else ()
            running.append(stack.enter_context(pod(redis_url, tmp, i, (*pod_flags, *own))))
        gateway, gateway_process = stack.enter_context(pods.subprocess_pod(
            *where, "--pool", POOL, *gateway_flags, log=tmp / "gateway.log", command="gateway"))
        built = Platform(gateway, running, gateway_process)
        eventually(lambda: built.stats()["pods"] == n_pods, f"the gateway to see {n_pods} pods")
        yield built
