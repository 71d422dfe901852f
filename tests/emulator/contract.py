"""The API server the contract tests talk to: the emulator, or a real cluster in the opt-in suite.

A contract test takes the `kube` fixture (an official `kubernetes` client and a fresh namespace)
and asserts only what a real kube-apiserver does, so `tests/e2e_cluster/` runs the same functions
against a cluster (`LIVEPLEX_E2E_CLUSTER=1`, `KUBECONFIG`). Against the emulator, the emulator runs
on its own loop in a thread, because the official client blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

import kubernetes
import pytest

from liveplex.emulator import Emulator

REAL_CLUSTER = os.environ.get("LIVEPLEX_E2E_CLUSTER") == "1" and bool(os.environ.get("KUBECONFIG"))


@dataclass
class Kube:
    client: kubernetes.client.ApiClient
    namespace: str
    emulator: Emulator | None = None
    """The emulator behind `client`; None on a real cluster."""

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.client)

    @property
    def apps(self) -> kubernetes.client.AppsV1Api:
        return kubernetes.client.AppsV1Api(self.client)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.client)

    def raw(self, method: str, path: str, body: object = None,
            content_type: str = "application/json", query: dict[str, str] | None = None) -> tuple[int, dict]:
        """A request the typed client would refuse to send (a wrong JSON type, another media type)."""
        method_, url, headers, data, _ = self.client.param_serialize(
            method, path, query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body, auth_settings=["BearerToken"])
        response = self.client.call_api(method_, url, headers, data)
        response.read()
        return response.status, json.loads(response.data or b"{}")

    @property
    def crds(self) -> kubernetes.client.ApiextensionsV1Api:
        return kubernetes.client.ApiextensionsV1Api(self.client)


def refusal(exc: pytest.ExceptionInfo[kubernetes.client.ApiException]) -> dict:
    """The `Status` body of a refused request."""
    return json.loads(exc.value.body)


def causes(status: dict) -> dict[str, list[str]]:
    """field -> the messages of its causes."""
    out: dict[str, list[str]] = {}
    for cause in (status.get("details") or {}).get("causes") or []:
        out.setdefault(cause.get("field", ""), []).append(cause["message"])
    return out


class _Background:
    """An emulator (API server and controllers, the kubelet only where asked) on an event loop in a thread."""

    def __init__(self, state: pathlib.Path, kubelet: bool = False) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.emulator = Emulator(state, kubelet=kubelet)
        self.url = self.run(self.emulator.start())

    def run(self, coro: object) -> object:
        future: Future = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return future.result(30)

    def close(self) -> None:
        self.run(self.emulator.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="session")
def contract_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Background | None]:
    """One emulator for every contract test (each gets its own namespace); None on a real cluster."""
    if REAL_CLUSTER:
        yield None
        return
    background = _Background(tmp_path_factory.mktemp("contract") / "state")
    yield background
    background.close()


def _connect(background: _Background | None) -> kubernetes.client.ApiClient:
    if background is None:
        return kubernetes.config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    config = kubernetes.client.Configuration(host=background.url)
    config.api_key = {"authorization": f"Bearer {background.emulator.admin_token}"}
    config.ssl_ca_cert = str(background.emulator.ca_file)
    return kubernetes.client.ApiClient(config)


@contextlib.contextmanager
def _namespaced(background: _Background | None) -> Iterator[Kube]:
    client = _connect(background)
    namespace = f"contract-{uuid.uuid4().hex[:8]}"
    core = kubernetes.client.CoreV1Api(client)
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        yield Kube(client, namespace, background.emulator if background is not None else None)
    finally:
        core.delete_namespace(namespace)
        client.close()


@pytest.fixture
def kube(contract_emulator: _Background | None) -> Iterator[Kube]:
    """The official client and a fresh namespace on the shared emulator (or the real cluster)."""
    with _namespaced(contract_emulator) as k:
        yield k


IMAGE = os.environ.get("LIVEPLEX_E2E_IMAGE", "ghcr.io/liveplex/liveplex:0.1.0")
"""What a contract test's pods run (`python3 -c ...`): the emulator runs any `liveplex` image as a
local process; on a cluster, set it to a liveplex image the nodes can pull (docs/images.md)."""


@pytest.fixture
def kubelet_kube(tmp_path: pathlib.Path) -> Iterator[Kube]:
    """As `kube`, on an emulator of its own whose kubelet runs the pods (the real cluster's nodes there)."""
    if REAL_CLUSTER:
        with _namespaced(None) as k:
            yield k
        return
    background = _Background(tmp_path / "state", kubelet=True)
    try:
        with _namespaced(background) as k:
            yield k
    finally:
        background.close()


@pytest.fixture
def fresh_kube(tmp_path: pathlib.Path) -> Iterator[Kube]:
    """As `kube`, on an emulator of its own (for tests that change cluster-wide state)."""
    background = _Background(tmp_path / "state")
    try:
        with _namespaced(background) as k:
            yield k
    finally:
        background.close()
