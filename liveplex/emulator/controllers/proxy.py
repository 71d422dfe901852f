"""The podman runtime's stand-in for cluster DNS and kube-proxy: the asyncio shell of `services.py`.

Development emulator, not for production. Each proxied Service gets a loopback address from the
kubelet's pool; a listener on every Service port forwards each connection to a ready endpoint
chosen at random (kube-proxy's iptables mode picks at random too), and every registered pod's
`/etc/hosts` is rewritten in place (its inode kept: the container has it bind-mounted) when the
Services change. A port the emulator may not bind (below 1024 when not root) is logged and left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from liveplex.emulator.apiserver import storage
from liveplex.emulator.controllers import endpointslices, services

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class _HostsFile:
    path: Path
    namespace: str
    pod_name: str
    pod_ip: str


class ServiceProxy:
    """Listeners for every proxied Service port and the hosts files that name them."""

    def __init__(self, store: storage.Store, take_address: Callable[[list[int]], str],
                 give_back: Callable[[str], None]) -> None:
        self.store = store
        self._take, self._give_back = take_address, give_back
        self.addresses: dict[services.Key, str] = {}
        self._routes: dict[tuple[services.Key, int], list[services.Backend]] = {}
        self._servers: dict[tuple[services.Key, int], asyncio.Server | None] = {}
        """None: a port that could not be bound (logged once)."""
        self._hosts: dict[Path, _HostsFile] = {}
        self._api: services.Backend = ("127.0.0.1", 0)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self, api: services.Backend) -> None:
        self._api = api
        self.store.subscribe(self._changed)
        await self.reconcile()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.unsubscribe(self._changed)
        tasks = [t for t in [self._task, *self._connections] if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in self._servers.values():
            if server is not None:
                server.close()
        self._servers.clear()
        for address in self.addresses.values():
            self._give_back(address)
        self.addresses.clear()

    def hosts_file(self, path: Path, namespace: str, pod_name: str, pod_ip: str) -> Path:
        """Register (and write) a pod's `/etc/hosts`; it is kept current until `forget`."""
        entry = self._hosts[path] = _HostsFile(path, namespace, pod_name, pod_ip)
        self._write(entry)
        return path

    def forget(self, path: Path) -> None:
        self._hosts.pop(path, None)

    def _changed(self, change: storage.Change) -> None:
        if change.key in ("/services", endpointslices.KEY):
            self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.reconcile()
            except Exception:  # one bad Service must not stop the proxy
                logger.exception("service proxy pass failed; retried on the next change")

    async def reconcile(self) -> None:
        """Addresses and listeners for the Services there are now, routes from their slices, hosts files."""
        snapshot = self.store.snapshot()
        svcs = [o for rt, o in snapshot if rt.key == "/services" and not o["metadata"].get("deletionTimestamp")]
        slices = [o for rt, o in snapshot if rt.key == endpointslices.KEY]
        wanted = services.proxied(svcs)
        self._routes = services.routes(svcs, slices, self._api)
        changed = False
        for key in [k for k in self.addresses if k not in wanted]:
            for port in [p for (k, p) in self._servers if k == key]:
                server = self._servers.pop((key, port))
                if server is not None:
                    server.close()
            self._give_back(self.addresses.pop(key))
            changed = True
        for key, ports in wanted.items():
            if key not in self.addresses:
                self.addresses[key] = self._take(ports)
                changed = True
            for port in ports:
                if (key, port) not in self._servers:
                    await self._listen(key, port)
        if changed:
            for entry in self._hosts.values():
                self._write(entry)

    async def _listen(self, key: services.Key, port: int) -> None:
        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._connections.add(task)
            try:
                await self._forward(key, port, reader, writer)
            finally:
                self._connections.discard(task)
        try:
            self._servers[key, port] = await asyncio.start_server(accepted, self.addresses[key], port)
        except OSError as exc:
            self._servers[key, port] = None
            logger.warning("service %s/%s: cannot listen on %s:%d: %s", *key, self.addresses[key], port, exc)

    async def _forward(self, key: services.Key, port: int, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        backends = self._routes.get((key, port)) or []
        try:
            if not backends:  # no ready endpoint: refused, as kube-proxy's REJECT rule does
                return
            host, target = random.choice(backends)
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                up_reader, up_writer = await asyncio.open_connection(host, target)
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    def _write(self, entry: _HostsFile) -> None:
        text = services.hosts(entry.namespace, entry.pod_name, entry.pod_ip, self.addresses)
        entry.path.parent.mkdir(parents=True, exist_ok=True)
        with open(entry.path, "r+" if entry.path.exists() else "w") as out:  # in place: the mount keeps the inode
            out.seek(0)
            out.write(text)
            out.truncate()
        entry.path.chmod(0o644)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then half-close the other side (as a TCP proxy does)."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()
