"""The podman runtime's Service proxy on real sockets: a Service name in a pod's hosts file leads,
through the proxy's listener on the Service port, to a ready endpoint on the slice's port; a
Service added later appears in the same hosts file (same inode: containers have it bind-mounted);
one with no ready endpoint refuses."""

from __future__ import annotations

import asyncio
import os
import pathlib

from liveplex.emulator import Emulator
from liveplex.emulator.controllers.kubelet import _Addresses
from liveplex.emulator.controllers.proxy import ServiceProxy


async def _line(hosts: pathlib.Path, name: str) -> str:
    """The hosts file's line for `name`, once the proxy's pass (after the store's change) wrote it."""
    async with asyncio.timeout(5):
        while not (line := next((x for x in hosts.read_text().splitlines() if x.endswith(f"\t{name}")), "")):
            await asyncio.sleep(0.02)
    return line


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"echo:" + await reader.readline())
    await writer.drain()
    writer.close()


async def test_a_service_name_reaches_a_ready_endpoint_through_the_proxy(cluster: Emulator,
                                                                         tmp_path: pathlib.Path) -> None:
    store = cluster.store
    backend = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = backend.sockets[0].getsockname()[1]
    addresses = _Addresses()
    proxy = ServiceProxy(store, addresses.take, addresses.give_back)
    await proxy.start(("127.0.0.1", 1))
    try:
        services = store.registry.by_key("/services")
        store.create(services, "default", {"metadata": {"name": "echo"},
                                           "spec": {"ports": [{"name": "tcp", "port": 7000}]}})
        store.create(store.registry.by_key("discovery.k8s.io/endpointslices"), "default", {
            "metadata": {"name": "echo-1", "labels": {"kubernetes.io/service-name": "echo"}},
            "addressType": "IPv4", "ports": [{"name": "tcp", "port": port}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]})
        hosts = proxy.hosts_file(tmp_path / "hosts", "default", "p", "127.0.9.9")
        inode = os.stat(hosts).st_ino
        line = await _line(hosts, "echo")
        address = line.split("\t")[0]
        assert line == f"{address}\techo.default.svc.cluster.local\techo.default.svc\techo.default\techo"
        reader, writer = await asyncio.open_connection(address, 7000)  # listening before the hosts file named it
        writer.write(b"hello\n")
        assert await reader.read() == b"echo:hello\n"
        writer.close()

        store.create(services, "default", {"metadata": {"name": "idle"}, "spec": {"ports": [{"port": 7001}]}})
        line = await _line(hosts, "idle")
        assert os.stat(hosts).st_ino == inode
        reader, writer = await asyncio.open_connection(line.split("\t")[0], 7001)
        assert await reader.read() == b""  # no ready endpoint: closed at once
        writer.close()
    finally:
        await proxy.stop()
        backend.close()
