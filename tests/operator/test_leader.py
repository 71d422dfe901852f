"""Two real operators (`liveplex operator run --leader-lease`) against the emulator: one leads and
reconciles, the other waits; SIGKILL the leader and the other takes the Lease and reconciles the
next change. They run as the chart's ServiceAccount with the chart's RBAC (its Lease Role included).
Both serve `/metrics` all along and log JSON lines; `kubectl get le` has a REASON."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from liveplex.emulator.apiserver import kinds
from liveplex.emulator.controllers import projection
from liveplex.operator import crd, names
from tests.chart import render
from tests.emulator.contract import Kube, fresh_kube  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120),
              pytest.mark.skipif(os.environ.get("LIVEPLEX_E2E_CLUSTER") == "1",
                                 reason="starts its own operators; the cluster suite uses the chart's")]

LEASE_S = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until(check: Callable[[], object], what: str, logs: tuple[Path, ...], deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {deadline_s} s; see {logs}"
        time.sleep(0.2)


def _scrape(port: int) -> dict[str, float]:
    """`name{labels}` → value, comments left out; empty while the port does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {key: float(value) for key, value in re.findall(r"^(\S+) (\S+)$", text, re.M)}


def _as_the_charts_account(kube: Kube) -> tuple[Path, str]:
    """The chart's operator RBAC installed; the kubeconfig of its ServiceAccount and its Lease."""
    assert kube.emulator is not None
    store = kube.emulator.store
    store.create(store.registry.by_key(kinds.NAMESPACE_KEY), "", {"metadata": {"name": render.NAMESPACE}})
    account = ""
    for obj in render.render({"operator": {"watch": {"namespaces": [kube.namespace]}}}):
        if obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            store.create(store.registry.by_kind(obj["apiVersion"], obj["kind"]), obj["metadata"].get("namespace", ""),
                         obj)
            account = obj["metadata"]["name"] if obj["kind"] == "ServiceAccount" else account
    creds = kube.emulator.credentials(render.NAMESPACE, account)  # what a process pod of the account gets
    config = kube.emulator.state_dir / f"{account}.kubeconfig"
    config.write_text(projection.process_kubeconfig(creds, kube.emulator.ca_file))
    return config, f"{render.NAMESPACE}/{account}"  # the chart names the Lease after the account


@contextlib.contextmanager
def _operator(kubeconfig: Path, namespace: str, lease: str, port: int,
              log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "liveplex.cli", "operator", "run", "-n", namespace, "--status-interval-s", "1",
             "--liveness", f"http://127.0.0.1:{_free_port()}/healthz", "--metrics-host", "127.0.0.1",
             "--metrics-port", str(port), "--leader-lease", lease,
             "--leader-lease-s", str(LEASE_S)],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)}, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(15)


def _replicas(kube: Kube) -> int | None:
    items = kube.apps.list_namespaced_deployment(kube.namespace).items
    return items[0].spec.replicas if items else None


def test_the_standby_takes_over_when_the_leader_is_killed(fresh_kube: Kube, tmp_path: Path) -> None:  # noqa: F811
    kube = fresh_kube
    assert kube.emulator is not None
    kube.crds.create_custom_resource_definition(crd.render_crd())
    kubeconfig, lease = _as_the_charts_account(kube)
    ports, logs = (_free_port(), _free_port()), (tmp_path / "first.log", tmp_path / "second.log")
    leader = 'liveplex_operator_leader'
    second = None
    with _operator(kubeconfig, kube.namespace, lease, ports[0], logs[0]) as first:
        _until(lambda: _scrape(ports[0]).get(leader) == 1, "the first operator leading", logs)
        with _operator(kubeconfig, kube.namespace, lease, ports[1], logs[1]) as second:
            _until(lambda: _scrape(ports[1]).get(leader) == 0, "the second operator serving /metrics", logs)
            body = {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "sim"},
                    "spec": {"engine": {"kind": "sim"}, "replicas": 1}}
            kube.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, kube.namespace, names.PLURAL, body)
            _until(lambda: _replicas(kube) == 1, "the leader's Deployment", logs)
            ok = 'liveplex_operator_reconciles_total{handler="reconcile",outcome="ok"}'
            _until(lambda: _scrape(ports[0]).get(ok, 0) >= 1, "a counted reconcile", logs)
            assert _scrape(ports[1]).get(ok) == 0  # the standby reconciled nothing
            _until(lambda: sum(v for k, v in _scrape(ports[0]).items()
                               if k.startswith("liveplex_operator_liveengines{")) == 1,
                   "the LiveEngine counted by phase", logs)

            first.send_signal(signal.SIGKILL)
            first.wait(5)
            killed_at = time.monotonic()
            kube.custom.patch_namespaced_custom_object(names.GROUP, names.VERSION, kube.namespace, names.PLURAL,
                                                       "sim", {"spec": {"replicas": 2}})
            _until(lambda: _replicas(kube) == 2, "the change reconciled by the second operator", logs)
            taken_s = time.monotonic() - killed_at
            _until(lambda: _scrape(ports[1]).get(ok, 0) >= 1, "the new leader's reconcile counted", logs)
            assert _scrape(ports[1])[leader] == 1
            assert taken_s >= LEASE_S * 0.5, taken_s  # it waited for the Lease, it did not reconcile beside
    held = kube.emulator.store.get(kube.emulator.store.registry.by_kind("coordination.k8s.io/v1", "Lease"),
                                   *lease.split("/"))
    assert held["spec"]["leaseTransitions"] == 1
    assert held["spec"]["holderIdentity"] == "" and second.returncode == 0  # SIGTERM handed the Lease over
    for log in logs:  # JSON lines, the leader election's among them
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        assert any(line["msg"] == "leading" for line in lines), log
    if shutil.which("kubectl"):
        admin = kube.emulator.write_kubeconfig(tmp_path / "kubeconfig", kube.namespace)
        table = subprocess.run(["kubectl", "--kubeconfig", str(admin), "get", "le"], capture_output=True,
                               text=True, check=True, timeout=30).stdout.splitlines()
        assert table[0].split()[:3] == ["NAME", "READY", "REASON"], table
