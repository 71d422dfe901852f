"""The local kubelet: binds every pod to the one node and runs its containers as local processes.

Development emulator, not for production. Each pod gets its own loopback address (127.0.x.y,
never 127.0.0.1) as `status.podIP`; its containers run as process groups with the pod's env, their
output appended to `<state_dir>/pods/<namespace>/<pod>/<container>.log` (served by `kubectl logs`).
Init containers run first, in order, each to completion. The pod's ServiceAccount credentials are
projected (`projection.py`); with the podman runtime Service names resolve through a per-pod
`/etc/hosts` and the Service proxy (`proxy.py`). Ready follows the containers and any readiness
gates. Probes (httpGet, tcpSocket, exec) drive `started`, `ready` and liveness restarts; `restartPolicy`
restarts exited containers with a doubling back-off (1 s up to `MAX_BACKOFF_S`, shorter than the
real 10 s to 5 min). Deletion follows the pod's grace period: preStop hook, SIGTERM, SIGKILL at the
deadline (2 s more when the hook used it all), then the pod object is removed. Hook runs are recorded
as pod Events (`PreStopHook`, an emulator addition, and `FailedPreStopHook` as upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from liveplex import processes
from liveplex.emulator.apiserver import builtins, errors, kinds, storage
from liveplex.emulator.controllers import podman, podspec, projection, proxy, services

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
SANDBOX_RETRY_S = 5.0
"""How soon a pod that found no address with its ports free is tried again."""
HOOK_EXTENSION_S = 2.0
"""Extra time after a preStop hook that used the whole grace period, as upstream."""


MAX_BUSY_ADDRESSES = 256
"""Addresses in a row with a port taken before `_Addresses.take` gives up (a wildcard listener)."""


class _Addresses:
    """Unique pod addresses 127.0.x.y (x >= 2), starting at a random place so emulators side by side rarely meet."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._next = random.randrange(2 * 256, 255 * 256)

    def take(self, ports: list[int]) -> str:
        busy = 0
        for _ in range(253 * 256):
            n, self._next = self._next, self._next + 1 if self._next < 255 * 256 - 2 else 2 * 256
            ip = f"127.0.{n // 256}.{n % 256}"
            if n % 256 in (0, 255) or ip in self._used:
                continue
            if not all(_bindable(ip, p) for p in ports):
                busy += 1
                if busy >= MAX_BUSY_ADDRESSES:  # not a neighbour's pods: something holds the ports everywhere
                    break
                continue
            self._used.add(ip)
            return ip
        raise RuntimeError("no free loopback address for a pod")

    def give_back(self, ip: str) -> None:
        self._used.discard(ip)


def _bindable(ip: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError as exc:
            return exc.errno != errno.EADDRINUSE
    return True


async def run_action(act: podspec.Action, container: dict, env: dict[str, str], timeout: float) -> tuple[bool, str]:
    """Run a probe's or hook's action once: (succeeded, what happened)."""
    try:
        if act.kind == "http":
            async with asyncio.timeout(timeout):
                return await _http_get(act)
        if act.kind == "tcp":
            async with asyncio.timeout(timeout):
                _, writer = await asyncio.open_connection(act.host, act.port)
            writer.close()
            return True, f"tcp {act.host}:{act.port} open"
        if act.kind == "sleep":
            await asyncio.sleep(min(act.seconds, timeout))
            return True, f"slept {act.seconds:g}s"
        line = podspec.exec_argv(container, act.command, sys.executable)
        proc = await asyncio.create_subprocess_exec(*line, env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.STDOUT)
        try:
            async with asyncio.timeout(timeout):
                out, _ = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        return proc.returncode == 0, f"exec {list(act.command)} exited {proc.returncode}: {out.decode()[-200:]}"
    except TimeoutError:
        return False, f"{act.kind} timed out after {timeout:g}s"
    except OSError as exc:
        return False, f"{act.kind} failed: {exc}"


async def _http_get(act: podspec.Action) -> tuple[bool, str]:
    reader, writer = await asyncio.open_connection(act.host, act.port)
    try:
        head = [f"GET {act.path} HTTP/1.1", f"Host: {act.host}:{act.port}", "User-Agent: kube-probe/1.32",
                "Accept: */*", "Connection: close", *(f"{k}: {v}" for k, v in act.headers)]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        await writer.drain()
        status_line = (await reader.readline()).decode(errors="replace").split()
        code = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
        url = f"http://{act.host}:{act.port}{act.path}"
        return 200 <= code < 400, f"GET {url} returned {code}"
    finally:
        writer.close()


_NOT_INHERITED = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT_HTTPS")
"""The host's own API credentials: a pod gets its ServiceAccount's (`Kubelet.project_account`) or none."""


def _inherited() -> dict[str, str]:
    """What a pod's process inherits of the host's environment (its PATH, locale, and so on)."""
    return {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}


def _exit_code(code: int | None) -> int:
    """A process's return code as a container's exit code (killed by signal N: 128 + N)."""
    return 128 + -code if code is not None and code < 0 else (code or 0)


def _terminated(exit_status: int, started: str, finished: str, message: str) -> dict:
    return {"terminated": {"exitCode": exit_status, "reason": "Completed" if exit_status == 0 else "Error",
                           "startedAt": started, "finishedAt": finished, **({"message": message} if message else {})}}


def _termination_file(pod_dir: Path, container: str) -> Path:
    """The host side of a podman container's terminationMessagePath."""
    return pod_dir / f"{container}.termination-log"


class _Container:
    """One container's process, probes and restarts; an init container runs to completion, unprobed."""

    def __init__(self, pod: _Pod, spec: dict, init: bool = False) -> None:
        self.pod, self.spec, self.name, self.init = pod, spec, spec["name"], init
        self.state: dict = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict = {}
        self.ready = self.started = False
        self.started_event = asyncio.Event()
        """Set once the startup probe (if any) has passed in the current run."""
        self.restarts = 0
        self.process: asyncio.subprocess.Process | None = None
        self.env: dict[str, str] = {}
        self.task: asyncio.Task | None = None
        self.done = asyncio.Event()
        """Set when the container will not run again (exited under restartPolicy, or stopped)."""

    def status(self) -> dict:
        out = {"name": self.name, "image": self.spec.get("image", ""), "imageID": "", "ready": self.ready,
               "started": self.started, "restartCount": self.restarts, "state": self.state,
               "lastState": self.last_state}
        if self.process is not None:
            out["containerID"] = f"emulator://{self.process.pid}"
        return out

    async def run(self, line: list[str]) -> None:
        backoff = 1.0
        policy = self.pod.obj["spec"].get("restartPolicy", "Always")
        if self.init and policy == "Always":  # an init container that succeeded is never run again
            policy = "OnFailure"
        log = self.pod.dir / f"{self.name}.log"
        written = _termination_file(self.pod.dir, self.name)
        while True:
            started = storage.stamp(self.pod.kubelet.store.now())
            if written.exists():
                written.write_text("")  # this run's message only
            try:
                with open(log, "ab") as out:
                    self.process = await asyncio.create_subprocess_exec(
                        *line, env={**_inherited(), "HOSTNAME": self.pod.name, **self.env}, stdout=out,
                        stderr=asyncio.subprocess.STDOUT, cwd=self.spec.get("workingDir") or self.pod.dir,
                        start_new_session=True, preexec_fn=processes.die_with_parent)
            except OSError as exc:
                self.state = {"waiting": {"reason": "RunContainerError", "message": str(exc)}}
                self.pod.publish()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            self.state = {"running": {"startedAt": started}}
            self.pod.event("Normal", "Started", f"Started container {self.name}")
            self.pod.publish()
            probes = asyncio.gather(self._startup_then_liveness(), self._readiness()) if not self.init else None
            code = await self.process.wait()
            if probes is not None:
                probes.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probes
            self.ready = self.started = False
            self.started_event.clear()
            finished = storage.stamp(self.pod.kubelet.store.now())
            status = _exit_code(code)
            message = podspec.termination_message(
                self.spec, status, written.read_text(errors="replace") if written.exists() else "",
                log.read_text(errors="replace") if status else "")
            if self.pod.terminating or policy == "Never" or (policy == "OnFailure" and code == 0):
                self.state = _terminated(status, started, finished, message)
                self.ready = self.init and self.succeeded  # a completed init container reports ready
                self.done.set()  # before publishing: the phase counts only containers that are done
                self.pod.publish()
                return
            self.last_state = _terminated(status, started, finished, message)
            self.restarts += 1
            self.state = {"waiting": {"reason": "CrashLoopBackOff", "message":
                                      f"back-off {backoff:g}s restarting failed container={self.name}"}}
            self.pod.event("Warning", "BackOff", f"Back-off restarting failed container {self.name}")
            self.pod.publish()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    @property
    def succeeded(self) -> bool:
        return self.state.get("terminated", {}).get("exitCode") == 0

    async def _loop(self, spec: podspec.Probe, on_result: Callable[[bool, int, int, str], Awaitable[bool]]) -> None:
        """Run `spec` every period; `on_result(ok, successes in a row, failures in a row, detail)` says go on."""
        await asyncio.sleep(spec.initial_delay)
        successes = failures = 0
        while True:
            ok, detail = await run_action(spec.action, self.spec, self.env, spec.timeout)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            if not await on_result(ok, successes, failures, detail):
                return
            await asyncio.sleep(spec.period)

    async def _startup_then_liveness(self) -> None:
        ip = self.pod.ip
        startup = podspec.probe(self.spec.get("startupProbe"), self.spec, ip)
        if startup is not None:
            async def on_startup(ok: bool, successes: int, failures: int, detail: str) -> bool:
                if ok:
                    self._mark_started()
                    return False
                if failures >= startup.failure_threshold:
                    await self._failed("startup", detail)
                    return False
                return True
            await self._loop(startup, on_startup)
            if not self.started:
                return
        else:
            self._mark_started()
        liveness = podspec.probe(self.spec.get("livenessProbe"), self.spec, ip)
        if liveness is None:
            return

        async def on_liveness(ok: bool, successes: int, failures: int, detail: str) -> bool:
            if failures >= liveness.failure_threshold:
                await self._failed("liveness", detail)
                return False
            return True
        await self._loop(liveness, on_liveness)

    async def _failed(self, probe: str, detail: str) -> None:
        """A startup or liveness probe ran out of failures: kubelet kills the container to restart it."""
        self.pod.event("Warning", "Unhealthy", f"{probe.capitalize()} probe failed: {detail}")
        await self.kill(f"Container {self.name} failed {probe} probe, will be restarted")

    def _mark_started(self) -> None:
        self.started = True
        self.started_event.set()
        self.pod.publish()

    async def _readiness(self) -> None:
        readiness = podspec.probe(self.spec.get("readinessProbe"), self.spec, self.pod.ip)
        await self.started_event.wait()
        if readiness is None:
            self.ready = True
            self.pod.publish()
            return

        async def on_readiness(ok: bool, successes: int, failures: int, detail: str) -> bool:
            if ok and successes >= readiness.success_threshold and not self.ready:
                self.ready = True
                self.pod.publish()
            elif not ok and failures >= readiness.failure_threshold and self.ready:
                self.ready = False
                self.pod.event("Warning", "Unhealthy", f"Readiness probe failed: {detail}")
                self.pod.publish()
            return True
        await self._loop(readiness, on_readiness)

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            if sig == signal.SIGKILL and self.pod.kubelet.runtime == "podman":  # the container outlives `podman run`
                processes.spawn(["podman", "rm", "-f", "-t", "0", podman.container_name(self.pod.obj, self.spec)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def kill(self, why: str) -> None:
        """Stop the process (SIGTERM, SIGKILL after the pod's grace); the run loop restarts it per policy."""
        grace = float(self.pod.obj["spec"].get("terminationGracePeriodSeconds", builtins.GRACE_SECONDS))
        self.pod.event("Normal", "Killing", why)
        self.signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.exited()
        self.signal(signal.SIGKILL)

    async def exited(self) -> None:
        if self.process is not None:
            await self.process.wait()

    async def terminate(self, deadline: float) -> None:
        """preStop, then SIGTERM, then SIGKILL at `deadline` (the grace period's end)."""
        loop = asyncio.get_running_loop()
        hook = ((self.spec.get("lifecycle") or {}).get("preStop"))
        running = self.process is not None and self.process.returncode is None
        if hook and running:
            act = podspec.action(hook, self.spec, self.pod.ip)
            if act is not None:
                ok, detail = await run_action(act, self.spec, self.env, max(0.0, deadline - loop.time()))
                if ok:
                    self.pod.event("Normal", "PreStopHook", f"PreStopHook of container {self.name}: {detail}")
                else:
                    self.pod.event("Warning", "FailedPreStopHook",
                                   f"PreStopHook failed for container {self.name}: {detail}")
                if loop.time() >= deadline:
                    deadline = loop.time() + HOOK_EXTENSION_S
        self.pod.event("Normal", "Killing", f"Stopping container {self.name}")
        self.signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                await self.exited()
        self.signal(signal.SIGKILL)
        await self.exited()


class _Pod:
    """One pod bound to this node: its address, its containers, its status as the kubelet reports it."""

    def __init__(self, kubelet: Kubelet, obj: dict, ip: str) -> None:
        self.kubelet, self.obj, self.ip = kubelet, obj, ip
        meta = obj["metadata"]
        self.namespace, self.name = meta["namespace"], meta["name"]
        self.dir = kubelet.state_dir / "pods" / self.namespace / self.name
        self.inits = [_Container(self, c, init=True) for c in obj["spec"].get("initContainers") or []]
        self.containers = [_Container(self, c) for c in obj["spec"].get("containers") or []]
        for c in self.everything if self.inits else ():
            c.state = {"waiting": {"reason": "PodInitializing"}}
        self.terminating = False
        self.started_at = storage.stamp(kubelet.store.now())
        self._transitions: dict[str, tuple[str, str]] = {}
        self.task: asyncio.Task | None = None
        self.attempts = 0
        """Tries to start the podman runtime's containers (ErrImagePull, then ImagePullBackOff)."""

    def event(self, kind: str, reason: str, message: str) -> None:
        self.kubelet.event(self.obj, kind, reason, message)

    def _condition(self, kind: str, ok: bool, reason: str = "", message: str = "") -> dict:
        status = "True" if ok else "False"
        before = self._transitions.get(kind)
        if before is None or before[0] != status:
            self._transitions[kind] = (status, storage.stamp(self.kubelet.store.now()))
        return {"type": kind, "status": status, "lastProbeTime": None,
                "lastTransitionTime": self._transitions[kind][1], **({"reason": reason} if reason else {}),
                **({"message": message} if message else {})}

    @property
    def everything(self) -> list[_Container]:
        """Init containers, then the containers."""
        return [*self.inits, *self.containers]

    def initialized(self) -> bool:
        return all(c.done.is_set() and c.succeeded for c in self.inits)

    def phase(self) -> str:
        if any(c.done.is_set() and not c.succeeded for c in self.inits):  # restartPolicy Never: the pod failed
            return "Failed"
        if not self.initialized():
            return "Pending"
        states = [c.state for c in self.containers]
        if self.containers and all("terminated" in s for s in states) and all(c.done.is_set()
                                                                                 for c in self.containers):
            return "Succeeded" if all(s["terminated"]["exitCode"] == 0 for s in states) else "Failed"
        if any("running" in s or c.restarts or "terminated" in s for s, c in zip(states, self.containers)):
            return "Running"
        return "Pending"

    def publish(self) -> None:
        """Write the whole status through the status subresource (a no-op write changes nothing)."""
        stored = self.kubelet.find(kinds.POD_KEY, self.namespace, self.name) or self.obj
        others = [c for c in (stored.get("status") or {}).get("conditions") or []
                  if c.get("type") not in podspec.KUBELET_CONDITIONS]  # readiness gates': their writers own them
        unready = [c.name for c in self.containers if not c.ready]
        containers_ready = bool(self.containers) and not unready
        ready, reason, message = podspec.ready_condition(stored, unready)
        incomplete = [c.name for c in self.inits if not (c.done.is_set() and c.succeeded)]
        not_initialized = ("ContainersNotInitialized", f"containers with incomplete status: [{' '.join(incomplete)}]")
        status = {"phase": self.phase(), "conditions": [
            self._condition("PodScheduled", True),
            self._condition("Initialized", not incomplete, *(not_initialized if incomplete else ())),
            self._condition("ContainersReady", containers_ready,
                            *(() if containers_ready else ("ContainersNotReady", message))),
            self._condition("Ready", ready, reason, message), *others],
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": self.ip, "podIPs": [{"ip": self.ip}],
            "startTime": self.started_at, "qosClass": "BestEffort",
            "containerStatuses": [c.status() for c in self.containers]}
        if self.inits:
            status["initContainerStatuses"] = [c.status() for c in self.inits]
        self.kubelet.write_status(self.namespace, self.name, status)

    async def run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.publish()
        lines: list[list[str]] = []
        while not lines and not self.terminating:
            pod = self.kubelet.find(kinds.POD_KEY, self.namespace, self.name) or self.obj
            pod = {**pod, "status": {**pod.get("status", {}), "podIP": self.ip, "podIPs": [{"ip": self.ip}],
                                     "hostIP": "127.0.0.1"}}
            blocked = None
            account_env, account_mounts = self.kubelet.project_account(pod, self.dir)
            for c in self.everything:
                own_env = podspec.environment(pod, c.spec, self.kubelet.find)
                if isinstance(own_env, podspec.Unrunnable):
                    line: list[str] | podspec.Unrunnable = own_env
                    env = {}
                elif self.kubelet.runtime == "podman":
                    self.attempts += 1
                    env = {**account_env, **own_env}
                    line = await self.kubelet.podman_line(pod, c.spec, env, self.dir, self.attempts, account_mounts)
                else:
                    env = {**account_env, **own_env}
                    line = podspec.argv(c.spec, self.ip, env, sys.executable)
                if isinstance(line, podspec.Unrunnable):
                    c.state = {"waiting": {"reason": line.reason, "message": line.message}}
                    blocked = blocked or line
                else:
                    c.env = env
                    if not self.inits:
                        c.state = {"waiting": {"reason": "ContainerCreating"}}
                    lines.append(line)
            if blocked is not None:
                lines = []
                self.event("Warning", "Failed", blocked.message)
                self.publish()
                await asyncio.sleep({podspec.CONFIG_ERROR: 2.0, podman.PULL_ERROR: 5.0}.get(blocked.reason,
                                                                                              MAX_BACKOFF_S))
        for c, line in zip(self.inits, lines):  # in order, each to completion (restarted per restartPolicy)
            c.task = asyncio.create_task(c.run(line))
            await c.done.wait()
            if not c.succeeded or self.terminating:
                await asyncio.Event().wait()  # the pod failed (restartPolicy Never) or is going away
        if self.inits:
            self.publish()
        for c, line in zip(self.containers, lines[len(self.inits):]):
            c.task = asyncio.create_task(c.run(line))
        await asyncio.Event().wait()

    async def terminate(self, grace: float) -> None:
        """The graceful end of a deleted pod; the caller removes the object afterwards."""
        self.terminating = True
        deadline = asyncio.get_running_loop().time() + grace
        await asyncio.gather(*(c.terminate(deadline) for c in self.everything))
        for c in self.everything:
            if c.task is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await c.task
        self.publish()

    def kill(self) -> None:
        for c in self.everything:
            c.signal(signal.SIGKILL)


class Kubelet:
    """Runs every pod of the store on node `node`; `logs` serves `kubectl logs`."""

    def __init__(self, store: storage.Store, state_dir: Path, node: str, runtime: str = "process") -> None:
        if runtime not in podman.RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(podman.RUNTIMES)}, got {runtime!r}")
        self.store, self.state_dir, self.node, self.runtime = store, Path(state_dir), node, runtime
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._addresses = _Addresses()
        self._queue: asyncio.Queue[storage.Change] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._terminations: set[asyncio.Task] = set()
        self.proxy = proxy.ServiceProxy(store, self._addresses.take, self._addresses.give_back) \
            if runtime == "podman" else None
        """Service names and ports for containers (a process pod resolves names as the host does)."""
        self._proxy_start: asyncio.Task | None = None
        self.credentials: Callable[[str, str], projection.Credentials] | None = None
        """(namespace, ServiceAccount) -> that account's credentials (the emulator issues them); None:
        pods get none."""

    def start(self, api: services.Backend = ("127.0.0.1", 0)) -> None:
        """Run the store's pods; `api` is the API server's address (the `kubernetes` Service's endpoint)."""
        if self.proxy is not None:
            self._proxy_start = asyncio.create_task(self.proxy.start(api))
        self.store.subscribe(self._changed)
        rt = self.store.registry.by_key(kinds.POD_KEY)
        for pod in self.store.list(rt)[0]:
            self._queue.put_nowait(storage.Change(storage.ADDED, kinds.POD_KEY, pod, 0))
        self._task = asyncio.create_task(self._run())

    async def stop(self, grace_s: float) -> None:
        """SIGTERM every container, SIGKILL what is left after `grace_s`; pod objects stay as they are."""
        with contextlib.suppress(ValueError):
            self.store.unsubscribe(self._changed)
        if self._task is not None:
            self._task.cancel()
        for task in list(self._terminations):
            task.cancel()
        pods = list(self._pods.values())
        for pod in pods:
            pod.terminating = True
            for c in pod.everything:
                c.signal(signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        for pod in pods:
            for c in pod.everything:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):
                        await c.exited()
                c.signal(signal.SIGKILL)
                await c.exited()
            await self._cancel(pod)
        if self.proxy is not None:
            if self._proxy_start is not None:
                await asyncio.gather(self._proxy_start, return_exceptions=True)
            await self.proxy.stop()

    async def _cancel(self, pod: _Pod) -> None:
        tasks = [t for t in [pod.task, *(c.task for c in pod.everything)] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _changed(self, change: storage.Change) -> None:
        if change.key == kinds.POD_KEY:
            self._queue.put_nowait(change)

    def project_account(self, pod: dict, pod_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
        """The pod's ServiceAccount credentials written under `pod_dir/serviceaccount` (`projection`):
        (env, read-only mounts host -> container) for its containers; nothing when automount is off."""
        namespace, name = pod["metadata"]["namespace"], projection.account_name(pod)
        if self.credentials is None or not projection.automount(
                pod, self.find(kinds.SERVICE_ACCOUNT_KEY, namespace, name)):
            return {}, {}
        creds = self.credentials(namespace, name)
        folder = pod_dir / "serviceaccount"
        folder.mkdir(parents=True, exist_ok=True)
        for file, data in projection.files(creds).items():
            (folder / file).write_bytes(data)
            (folder / file).chmod(0o644)  # the projected volume's default mode: any pod user reads it
        if self.runtime == "podman":
            return projection.service_env(creds), {str(folder): projection.MOUNT_PATH}
        config = folder / "kubeconfig"
        config.write_text(projection.process_kubeconfig(creds, (folder / "ca.crt").resolve()))
        return {"KUBECONFIG": str(config.resolve())}, {}

    async def podman_line(self, pod: dict, container: dict, env: dict[str, str], pod_dir: Path,
                          attempts: int, mounts: dict[str, str]) -> list[str] | podspec.Unrunnable:
        """The podman runtime's `podman run` line: the image looked up in local storage, the volumes
        made on the host (folders owned by the pod's fsGroup), `mounts` and the pod's `/etc/hosts`
        (`proxy`) read-only."""
        image = container.get("image", "")
        inspect = await asyncio.create_subprocess_exec(
            "podman", "image", "inspect", "--format", "{{.Config.User}}", image,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        out, _ = await inspect.communicate()
        if inspect.returncode != 0:
            return podman.pull_refusal(image, attempts)
        volumes = podman.plan_volumes(pod, pod_dir, self.state_dir / "claims", self.find)
        if isinstance(volumes, podspec.Unrunnable):
            return volumes
        owner = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        for volume in volumes.values():
            if volume.host is None or volume.host.exists() and not volume.files:
                continue
            volume.host.mkdir(parents=True, exist_ok=True)
            for name, data in volume.files.items():
                (volume.host / name).write_bytes(data)
            if owner is not None:
                for path in (volume.host, *volume.host.rglob("*")):
                    os.chown(path, -1, owner)
                    path.chmod(path.stat().st_mode | 0o070)
        if self.proxy is not None:
            hosts = self.proxy.hosts_file(pod_dir / "hosts", pod["metadata"]["namespace"], pod["metadata"]["name"],
                                          pod["status"]["podIP"])
            mounts = {**mounts, str(hosts): "/etc/hosts"}
        written = _termination_file(pod_dir, container["name"])
        written.touch()
        written.chmod(0o666)  # whichever user the container runs as writes it
        return podman.run_argv(pod, container, env, volumes, out.decode().strip(), mounts, written)

    def find(self, key: str, namespace: str, name: str) -> dict | None:
        rt = self.store.registry.find_key(key)
        return None if rt is None else self.store.find(rt, namespace, name)

    async def _run(self) -> None:
        rt = self.store.registry.by_key(kinds.POD_KEY)
        while True:
            change = await self._queue.get()
            try:
                await self._handle(rt, change)
            except Exception:  # one pod's bad spec must not stop the kubelet
                logger.exception("kubelet could not handle a change of pod %s", change.object["metadata"].get("name"))

    async def _handle(self, rt: kinds.ResourceType, change: storage.Change) -> None:
        """Bind a new pod, finish a deleted one, forget a removed one."""
        meta = change.object["metadata"]
        key = (meta["namespace"], meta["name"])
        pod = self._pods.get(key)
        if change.type == storage.DELETED:
            if pod is not None:
                pod.kill()
                await self._cancel(pod)
                self._forget(key)
            return
        node = change.object["spec"].get("nodeName")
        if node not in (None, self.node) or (pod is not None and pod.obj["metadata"]["uid"] != meta["uid"]):
            return
        if pod is None and meta.get("deletionTimestamp"):
            with contextlib.suppress(errors.ApiError):
                self.store.delete(rt, *key, storage.DeleteOptions(grace_seconds=0))
            return
        if pod is None:
            self._bind(rt, change.object)
        elif change.object["spec"].get("readinessGates") and not pod.terminating and not meta.get("deletionTimestamp"):
            pod.publish()  # a gate's condition may have changed: Ready follows it
        elif meta.get("deletionTimestamp") and not pod.terminating:
            grace = float(meta.get("deletionGracePeriodSeconds", 0))
            task = asyncio.create_task(self._finish(rt, pod, grace))
            self._terminations.add(task)
            task.add_done_callback(self._terminations.discard)

    def _bind(self, rt: kinds.ResourceType, obj: dict) -> None:
        meta = obj["metadata"]
        ports = [int(p["containerPort"]) for c in obj["spec"].get("containers") or [] for p in c.get("ports") or []
                 if p.get("containerPort")]
        try:
            address = self._addresses.take(ports)
        except RuntimeError:  # a host process listening on 0.0.0.0 holds a port on every address
            self.event(obj, "Warning", "FailedCreatePodSandBox",
                       f"Failed to create pod sandbox: no loopback address has ports {ports} free (a host process "
                       f"listening on 0.0.0.0 takes a port from every address); retrying in {SANDBOX_RETRY_S:g}s")
            asyncio.get_running_loop().call_later(SANDBOX_RETRY_S, self._retry, meta["namespace"], meta["name"])
            return
        try:
            bound = self.store.patch(rt, meta["namespace"], meta["name"], storage.MERGE,
                                     {"spec": {"nodeName": self.node}})
        except errors.ApiError:
            self._addresses.give_back(address)
            return
        pod = _Pod(self, bound, address)
        self._pods[(pod.namespace, pod.name)] = pod
        self.event(bound, "Normal", "Scheduled", f"Successfully assigned {pod.namespace}/{pod.name} to {self.node}",
                   component="default-scheduler")
        pod.task = asyncio.create_task(pod.run())

    def _retry(self, namespace: str, name: str) -> None:
        obj = self.find(kinds.POD_KEY, namespace, name)
        if obj is not None:
            self._queue.put_nowait(storage.Change(storage.ADDED, kinds.POD_KEY, obj, 0))

    async def _finish(self, rt: kinds.ResourceType, pod: _Pod, grace: float) -> None:
        await pod.terminate(grace)
        await self._cancel(pod)
        self._forget((pod.namespace, pod.name))
        with contextlib.suppress(errors.ApiError):
            self.store.delete(rt, pod.namespace, pod.name, storage.DeleteOptions(grace_seconds=0))

    def _forget(self, key: tuple[str, str]) -> None:
        pod = self._pods.pop(key, None)
        if pod is not None:
            self._addresses.give_back(pod.ip)
            if self.proxy is not None:
                self.proxy.forget(pod.dir / "hosts")

    def write_status(self, namespace: str, name: str, status: dict) -> None:
        rt = self.store.registry.by_key(kinds.POD_KEY)
        with contextlib.suppress(errors.ApiError):
            self.store.update(rt, namespace, name, {"status": status}, "status")

    def event(self, obj: dict, kind: str, reason: str, message: str, component: str = "kubelet") -> None:
        rt = self.store.registry.by_key("/events")
        meta = obj["metadata"]
        now = storage.stamp(self.store.now())
        body = {"metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}",
                             "namespace": meta["namespace"]},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": meta["namespace"],
                                   "name": meta["name"], "uid": meta["uid"]},
                "reason": reason, "message": message, "type": kind, "count": 1,
                "source": {"component": component, "host": self.node}, "firstTimestamp": now, "lastTimestamp": now,
                "reportingComponent": component, "reportingInstance": self.node}
        with contextlib.suppress(errors.ApiError):
            self.store.create(rt, meta["namespace"], body)

    def logs(self, namespace: str, pod: str, container: str | None, tail: int | None) -> str:
        obj = self.find(kinds.POD_KEY, namespace, pod)
        if obj is None:
            raise errors.not_found("pods", "", pod)
        names = [c["name"] for c in obj["spec"].get("containers") or []]
        if not container:
            if len(names) != 1:
                every = names + [c["name"] for c in obj["spec"].get("initContainers") or []]
                raise errors.bad_request(f"a container name must be specified for pod {pod}, choose one of: {every}")
            container = names[0]
        elif container not in names + [c["name"] for c in obj["spec"].get("initContainers") or []]:
            # upstream's validateContainer (pkg/registry/core/pod/strategy.go): only the pod's own containers,
            # so the name never reaches the file system unless it is one the pod's validation admitted
            raise errors.bad_request(f"container {container} is not valid for pod {pod}")
        path = self.state_dir / "pods" / namespace / pod / f"{container}.log"
        if not path.exists():
            raise errors.bad_request(f'container "{container}" in pod "{pod}" is waiting to start')
        lines = path.read_text(errors="replace").splitlines(keepends=True)
        return "".join(lines[-tail:] if tail else lines)
