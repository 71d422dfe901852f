"""`Emulator`: the API server, the controllers and the kubelet on one asyncio loop, started and stopped as one.

Development emulator, not for production (see docs/emulator.md for what it does not prove). The
API server listens on 127.0.0.1 over HTTPS (`certs.py`); the controllers and the kubelet talk to the store
in-process, through the same write path the HTTP routes use.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from liveplex.emulator import certs, kubeconfig
from liveplex.emulator.apiserver import auth, kinds, routes, storage
from liveplex.emulator.controllers import loops, projection
from liveplex.emulator.controllers.kubelet import Kubelet

NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NODE = "liveplex-emulator"
"""The one node every pod is bound to."""
MAX_HEADER_BYTES = 1 << 20
"""k8s.io/apiserver's secure serving `MaxHeaderBytes`: the request line and headers together."""


class _Server(uvicorn.Server):
    """uvicorn inside someone else's loop: the host program keeps its own signal handlers."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Emulator:
    """One emulated cluster whose pods' files and logs live under `state_dir`."""

    def __init__(self, state_dir: str | os.PathLike[str], port: int = 0, *, kubelet: bool = True,
                 controllers: bool = True, history: int = 10_000, runtime: str = "process") -> None:
        self.state_dir = Path(state_dir)
        self.port = port
        self.store = storage.Store(time.time, history)
        self.tokens = auth.Tokens()
        self.kubelet = Kubelet(self.store, self.state_dir, NODE, runtime) if kubelet else None
        self.api = routes.Api(self.store, self.kubelet.logs if self.kubelet else None, self.tokens)
        self._accounts: dict[tuple[str, str], str] = {}
        self.pki: certs.Pki | None = None
        self._controllers = loops.Controllers(self.store) if controllers else None
        self._server: _Server | None = None
        self._serving: asyncio.Task | None = None
        self.url = ""

    async def start(self) -> str:
        """Serve, seed the cluster (namespaces, the node), start the controllers; returns the URL."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._seed()
        self.pki = certs.make(self.state_dir / "pki")
        # h11, not httptools: httptools refuses a method it does not know before the application sees
        # it, where kube-apiserver answers a 405 Status; a request head may take kube-apiserver's
        # MaxHeaderBytes (1 MiB), not h11's 16 KiB
        config = uvicorn.Config(self.api.app, host="127.0.0.1", port=self.port, log_level="warning", http="h11",
                                h11_max_incomplete_event_size=MAX_HEADER_BYTES, interface="asgi3",
                                lifespan="off", access_log=False, timeout_graceful_shutdown=1,
                                ssl_certfile=str(self.pki.cert), ssl_keyfile=str(self.pki.key))
        self._server = _Server(config)
        self._serving = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._serving.done():
                self._serving.result()
                raise RuntimeError("the emulator's API server stopped while starting")
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.api.address = f"127.0.0.1:{port}"
        self.url = f"https://127.0.0.1:{port}"
        if self._controllers is not None:
            self._controllers.start()
        if self.kubelet is not None:
            self.kubelet.credentials = self.credentials
            self.kubelet.start(("127.0.0.1", port))
        return self.url

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop every pod process (SIGTERM, then SIGKILL after `grace_s`), the controllers and the server."""
        if self.kubelet is not None:
            await self.kubelet.stop(grace_s)
        if self._controllers is not None:
            await self._controllers.stop()
        self.api.close()
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            await self._serving
        self._server = self._serving = None

    @property
    def admin_token(self) -> str:
        """The cluster-admin token every kubeconfig `write_kubeconfig` writes carries."""
        return self.tokens.admin

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed the server's."""
        assert self.pki is not None, "the emulator has not started"
        return self.pki.ca

    def tls(self) -> ssl.SSLContext:
        """A client context that trusts the server (httpx's `verify`)."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    def write_kubeconfig(self, path: str | os.PathLike[str], namespace: str = "default") -> Path:
        return kubeconfig.write_kubeconfig(path, self.url, self.tokens.admin, namespace, self.ca_file.read_bytes())

    def credentials(self, namespace: str, account: str) -> projection.Credentials:
        """A token of ServiceAccount `namespace/account` (one per account, issued on first use) and how to
        reach this server: what the kubelet projects into that account's pods, so their rights are RBAC's."""
        token = self._accounts.get((namespace, account))
        if token is None:
            token = self._accounts[namespace, account] = self.tokens.issue(namespace, account)
        host, port = self.api.address.rsplit(":", 1)
        return projection.Credentials(token, namespace, self.ca_file.read_bytes(), host, int(port))

    def _seed(self) -> None:
        registry = self.store.registry
        namespaces = registry.by_key(kinds.NAMESPACE_KEY)
        for name in NAMESPACES:
            if self.store.find(namespaces, "", name) is None:
                self.store.create(namespaces, "", {"metadata": {"name": name}})
        nodes = registry.by_key("/nodes")
        if self.store.find(nodes, "", NODE) is None:
            self.store.create(nodes, "", {"metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}})
            self.store.update(nodes, "", NODE, {"status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "liveplex emulator kubelet"}],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": NODE}],
                "nodeInfo": {"kubeletVersion": "v1.32.0-liveplex-emulator"}}}, "status")
        services = registry.by_key("/services")
        if self.store.find(services, "default", "kubernetes") is None:
            self.store.create(services, "default", {"metadata": {"name": "kubernetes"}, "spec": {
                "clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}})


async def run_emulator(port: int, state_dir: str | os.PathLike[str], kubeconfig_path: str | None = None,
                       runtime: str = "process") -> None:
    """Run an emulator until cancelled (Ctrl-C); writes a kubeconfig when given a path."""
    emulator = Emulator(state_dir, port, runtime=runtime)
    url = await emulator.start()
    if kubeconfig_path:
        emulator.write_kubeconfig(kubeconfig_path)
    print(f"liveplex emulator (development only, not a real cluster): {url}"
          + (f"\n  export KUBECONFIG={kubeconfig_path}" if kubeconfig_path else ""), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await emulator.stop()
