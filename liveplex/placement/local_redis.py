"""`LocalRedis`: a throwaway `redis-server` on a loopback port, for tests, `liveplex up` and the latency probe.

No persistence (`--save "" --appendonly no`), its own temporary directory, ready only once it answers
INFO with its own process id (not another server's on the same port), and killed on stop. `restart`
brings it back empty on the same port, which is how tests play "Redis went down".
"""

from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import cast

import redis

from liveplex import processes

_ATTEMPTS = 5
"""Ports are picked free and then bound by redis-server; another process may win in between."""


class LocalRedisError(RuntimeError):
    """redis-server is missing, exited, or did not answer before the deadline."""


class LocalRedis:
    """One redis-server process; `start` and `stop` may repeat, the port stays once chosen."""

    def __init__(self, executable: str = "redis-server", port: int | None = None,
                 ready_timeout_s: float = 10.0, options: tuple[str, ...] = ()) -> None:
        """`options`: more redis-server arguments (`LocalCluster`'s cluster mode)."""
        self.executable = executable
        self.options = options
        self.port = port
        self.ready_timeout_s = ready_timeout_s
        self._fixed_port = port is not None
        self._process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise LocalRedisError("redis-server has not been started")
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Start redis-server and return its URL once it answers."""
        if self.running:
            raise LocalRedisError("redis-server is already running")
        if shutil.which(self.executable) is None:
            raise LocalRedisError(f"{self.executable} not found (Debian: apt-get install redis-server)")
        self._dir = tempfile.TemporaryDirectory(prefix="liveplex-redis-")
        error = LocalRedisError("no attempt")
        for _ in range(1 if self._fixed_port else _ATTEMPTS):
            if not self._fixed_port:
                self.port = _free_port()
            try:
                self._launch()
            except LocalRedisError as exc:
                error = exc
                continue
            self._fixed_port = True  # a restart comes back where clients already point
            return self.url
        self.stop()
        raise error

    def stop(self) -> None:
        """Kill redis-server (SIGKILL: nothing to flush) and wait until it has exited."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=self.ready_timeout_s)
            self._process = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def restart(self) -> str:
        """Stop, then start empty on the same port."""
        self.stop()
        return self.start()

    def __enter__(self) -> LocalRedis:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _launch(self) -> None:
        assert self._dir is not None and self.port is not None
        log = pathlib.Path(self._dir.name) / "redis.log"
        # its own session (a terminal's Ctrl-C reaches only the command that started it, which stops
        # its pods before Redis: they leave the pool cleanly) and dead with its parent
        self._process = processes.spawn(
            [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self._dir.name, "--logfile", str(log), "--daemonize", "no", *self.options],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=0.2, socket_connect_timeout=0.2)
        deadline = time.monotonic() + self.ready_timeout_s
        try:
            while time.monotonic() < deadline:
                try:  # the answer must come from our process, not from whoever else holds the port
                    if client.info("server")["process_id"] == self._process.pid:
                        return
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                try:  # waits for the process to die, which is also the pause before the next try
                    code = self._process.wait(timeout=0.02)
                except subprocess.TimeoutExpired:
                    continue
                self._process = None
                raise LocalRedisError(f"redis-server exited with {code}: {_tail(log)}")
        finally:
            client.close()
        self._process.kill()
        self._process.wait()
        self._process = None
        raise LocalRedisError(f"redis-server on port {self.port}: no answer in {self.ready_timeout_s} s: {_tail(log)}")


CLUSTER_OPTIONS = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-require-full-coverage", "no", "--cluster-node-timeout", "1000")
"""A shard that dies leaves the others serving their own slots (placement goes on in their sub-pools)."""


class LocalCluster:
    """A Redis Cluster of `shards` masters (no replicas) on loopback ports, for tests and the bench.

    Each shard is a `LocalRedis` in cluster mode; the 16,384 slots are split evenly (`CLUSTER
    ADDSLOTSRANGE`), the nodes `CLUSTER MEET` the first, and `start` returns once every node reports
    `cluster_state:ok` and knows every shard. `shards[i].stop()` plays "a shard died"."""

    def __init__(self, shards: int = 3, ready_timeout_s: float = 30.0) -> None:
        if shards < 1:
            raise LocalRedisError("a cluster has at least one shard")
        self.shards = [LocalRedis(ready_timeout_s=ready_timeout_s, options=CLUSTER_OPTIONS) for _ in range(shards)]
        self.ready_timeout_s = ready_timeout_s

    @property
    def url(self) -> str:
        """A node to start from (any would do: the client learns the rest)."""
        return self.shards[0].url.removesuffix("/0")

    def start(self) -> str:
        try:
            for shard in self.shards:
                shard.start()
            self._form()
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        for shard in self.shards:
            shard.stop()

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _form(self) -> None:
        step = 16384 // len(self.shards)
        clients = [redis.Redis(host="127.0.0.1", port=s.port or 0, socket_timeout=2, decode_responses=True)
                   for s in self.shards]  # every shard has its port once started
        try:
            for i, client in enumerate(clients):  # every pair meets: no waiting for gossip to introduce them
                for shard in self.shards[i + 1:]:
                    client.execute_command("CLUSTER", "MEET", "127.0.0.1", shard.port)
            self._until(lambda: all(_info(c)["cluster_known_nodes"] == str(len(clients)) for c in clients))
            for i, client in enumerate(clients):  # known to each other first: the slots then spread at once
                last = 16383 if i == len(clients) - 1 else (i + 1) * step - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, last)
            self._until(lambda: all(_info(c)["cluster_state"] == "ok" and _info(c)["cluster_slots_assigned"] == "16384"
                                    for c in clients))
        finally:
            for client in clients:
                client.close()

    def _until(self, formed: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while not formed():
            if time.monotonic() > deadline:
                raise LocalRedisError(f"the cluster did not form in {self.ready_timeout_s} s")
            time.sleep(0.02)


def _info(client: redis.Redis) -> dict[str, str]:
    text = cast(str, client.execute_command("CLUSTER", "INFO"))  # decoded: `decode_responses`
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(log: pathlib.Path) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-3:])
    except OSError:
        return "(no log)"
