"""The chart installed for real into the emulator: its objects applied with kubectl, its operator
and gateway run by the emulator's kubelet as local `liveplex` processes from the chart's own image,
and a session placed through that gateway onto the pods of a LiveEngine the operator made."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import websockets
import yaml

from liveplex.emulator import Emulator
from tests.chart import render
from tests.support import platform
from tests.support.clients import START, until

pytestmark = pytest.mark.timeout(240)

ENGINE = {"apiVersion": "live.liveplex.io/v1alpha1", "kind": "LiveEngine",
          "metadata": {"name": "sim", "namespace": render.NAMESPACE},
          "spec": {"replicas": 2, "engine": {"kind": "sim"},
                   "model": {"name": "liveplex-sim", "servedModels": ["gpt-live-1"]},
                   "capacity": {"maxSessions": 4}, "drain": {"gracePeriodSeconds": 30}}}


@contextlib.contextmanager
def emulator(state: Path, runtime: str = "process") -> Iterator[tuple[Path, asyncio.AbstractEventLoop]]:
    """The emulator on its own loop in a thread; yields its kubeconfig."""
    import threading

    loop = asyncio.new_event_loop()
    emu = Emulator(state, runtime=runtime)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(emu.start(), loop).result(30)
        yield emu.write_kubeconfig(state / "kubeconfig"), loop
    finally:
        asyncio.run_coroutine_threadsafe(emu.stop(2.0), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def kubectl(config: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["kubectl", "--kubeconfig", str(config), *args], input=stdin, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def ready_pods(config: Path, selector: str) -> list[dict]:
    items = json.loads(kubectl(config, "get", "pods", "-A", "-l", selector, "-o", "json"))["items"]
    return [p for p in items if any(c["type"] == "Ready" and c["status"] == "True"
                                    for c in p["status"].get("conditions", ()))]


def _leaders(config: Path) -> list[float]:
    """`liveplex_operator_leader` summed over the operator pods' /metrics (each pod's IP, port `metrics`)."""
    total = 0.0
    for pod in ready_pods(config, "app.kubernetes.io/name=liveplex-operator"):
        port = next(p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"] if p["name"] == "metrics")
        try:
            with urllib.request.urlopen(f"http://{pod['status']['podIP']}:{port}/metrics", timeout=2) as answer:
                text = answer.read().decode()
        except OSError:
            return []
        total += sum(float(line.split()[-1]) for line in text.splitlines()
                     if line.startswith("liveplex_operator_leader "))
    return [total]


def install_and_place_a_session(config: Path, values: dict, ready_s: float = 60.0) -> str:
    """Apply what `helm install` would (CRD first, hooks left out), wait for the operator and one
    gateway, apply a sim LiveEngine, and hold a session through the gateway on its pods; returns the
    gateway's base URL (what the SDK takes)."""
    objs = render.render(values)
    crds = [o for o in objs if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in objs if o["kind"] != "CustomResourceDefinition"  # hooks (`helm test`) are not installed
            and "helm.sh/hook" not in o["metadata"].get("annotations", {})]
    kubectl(config, "apply", "-f", "-", stdin=json.dumps(  # (`create namespace` speaks protobuf)
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": render.NAMESPACE}}))
    kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
    kubectl(config, "wait", "--for=condition=established", "crd/liveengines.live.liveplex.io")
    kubectl(config, "apply", "-f", "-", stdin=yaml.safe_dump_all(rest))
    platform.eventually(lambda: len(ready_pods(config, "app.kubernetes.io/name=liveplex-gateway")) == 1,
                        "the chart's gateway pod Ready", deadline_s=ready_s)
    operators = values.get("operator", {}).get("replicas", 2)
    platform.eventually(lambda: len(ready_pods(config, "app.kubernetes.io/name=liveplex-operator")) == operators,
                        "the chart's operator pods Ready", deadline_s=ready_s)
    platform.eventually(lambda: _leaders(config) == [1], "one operator leading", deadline_s=ready_s)
    kubectl(config, "apply", "-f", "-", stdin=json.dumps(ENGINE))
    platform.eventually(lambda: len(ready_pods(config, "app.kubernetes.io/instance=sim")) == 2,
                        "the LiveEngine's two pods Ready", deadline_s=ready_s + 30)
    (gateway,) = ready_pods(config, "app.kubernetes.io/name=liveplex-gateway")
    port = next(p["containerPort"] for c in gateway["spec"]["containers"] for p in c.get("ports", ()))
    address = f"{gateway['status']['podIP']}:{port}"
    url = f"ws://{address}/v1/live/sessions"

    async def session() -> None:
        async with asyncio.timeout(60):
            while True:  # the gateway learns the route within a roll-up and a refresh
                ws = await websockets.connect(url)
                await ws.send(orjson.dumps(START).decode())
                event = orjson.loads(await ws.recv())
                if event["type"] == "session.started":
                    break
                await ws.close()
                await asyncio.sleep(0.5)
        await ws.send(orjson.dumps({"type": "session.close"}).decode())
        closed, _ = await until(ws, "session.closed")
        assert closed["reason"] == "close_requested"
        await ws.close()
    asyncio.run(session())
    return f"http://{address}/v1"


def test_the_chart_runs_in_the_emulator_and_places_a_session(redis_url, tmp_path) -> None:
    with emulator(tmp_path / "state") as (config, _):
        install_and_place_a_session(config, {"redis": {"mode": "external", "external": {"url": redis_url}},
                                             "gateway": {"replicas": 1}})
