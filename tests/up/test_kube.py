"""`liveplex up --kube` end to end: real kubectl, real kopf, real Redis and real sim pods run by the
emulator's kubelet from the operator's rendered pod template, sessions through the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import websockets

from tests.support import platform, pods
from tests.support.clients import StampedCall

pytestmark = pytest.mark.timeout(240)

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
EMPTIEST, ONE_SESSION = str(0 - 1_000_000), str(1 - 1_000_000)
"""The operator marks a pool's emptiest pods with their sessions minus 1,000,000 (operator/deletion_cost)."""
START = {"type": "session.start", "event_id": "s1", "session": {"model": "gpt-live-1"}}
ENGINE = """apiVersion: live.liveplex.io/v1alpha1
kind: LiveEngine
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  engine: {{kind: sim}}
  model: {{name: liveplex-sim, servedModels: [gpt-live-1]}}
  capacity: {{maxSessions: 4, jitterFrames: {jitter}, prebufferFrames: 2}}
  drain: {{gracePeriodSeconds: 30}}
"""


class Kube:
    def __init__(self, kubeconfig: Path, gateway: str) -> None:
        self.kubeconfig = kubeconfig
        self.gateway = gateway

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), *args], input=stdin,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def get(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def condition(self, name: str, kind: str) -> dict:
        status = self.get("le", name).get("status", {})
        return next((c for c in status.get("conditions", ()) if c["type"] == kind), {})

    def pod_names(self, name: str) -> set[str]:
        return {p["metadata"]["name"] for p in self.get("pods", "-l", f"app.kubernetes.io/instance={name}")["items"]}

    def costs(self, name: str) -> dict[str, str]:
        """Pod -> its deletion cost, for the pods that have one."""
        return {p["metadata"]["name"]: p["metadata"]["annotations"][DELETION_COST]
                for p in self.get("pods", "-l", f"app.kubernetes.io/instance={name}")["items"]
                if DELETION_COST in p["metadata"].get("annotations", {})}

    def pod_sessions(self, pods: dict[str, str]) -> dict[str, int]:
        """Each pod's running sessions, from its own /live/stats."""
        out = {}
        for name in pods:
            pod = self.get("pod", name)
            out[name] = platform.get_json(f"http://{pod['status']['podIP']}:8000/live/stats")["sessions"]
        return out

    def costed(self, name: str, cost: str) -> set[str]:
        """Ready pods whose `pod-deletion-cost` annotation is `cost`."""
        return {p["metadata"]["name"] for p in self.ready_pods(name)
                if p["metadata"].get("annotations", {}).get(DELETION_COST) == cost}

    def ready_pods(self, name: str) -> list[dict]:
        items = self.get("pods", "-l", f"app.kubernetes.io/instance={name}")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", ()))]


@contextlib.contextmanager
def up(redis_url: str, tmp: Path) -> Iterator[Kube]:
    port = pods.free_port()
    kubeconfig = tmp / "kubeconfig"
    log = open(tmp / "up.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "liveplex.cli", "up", "--kube", "--port", str(port), "--redis-url", redis_url,
         "--kubeconfig", str(kubeconfig), "--state-dir", str(tmp / "state")],
        stdout=subprocess.PIPE, stderr=log, cwd=tmp, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    ready = threading.Event()

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            if b"Ctrl-C stops everything" in line:
                ready.set()
        ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        assert ready.wait(90) and proc.poll() is None, (tmp / "up.log").read_text()
        yield Kube(kubeconfig, f"127.0.0.1:{port}")
    finally:
        pods.interrupt(proc, 30)
        log.close()


async def started(address: str, model: str = "gpt-live-1"):
    ws = await websockets.connect(f"ws://{address}/v1/live/sessions", max_queue=None)
    await ws.send(orjson.dumps({**START, "session": {"model": model}}).decode())
    async with asyncio.timeout(10):
        while (event := orjson.loads(await ws.recv()))["type"] != "session.started":
            assert event["type"] != "error", event
    return ws


async def closed(ws) -> None:
    """Close the session as its caller asks, and check it ended so."""
    await ws.send(orjson.dumps({"type": "session.close"}).decode())
    async with asyncio.timeout(10):
        while (event := orjson.loads(await ws.recv()))["type"] != "session.closed":
            pass
    assert event["reason"] == "close_requested"
    await ws.close()


def advertised(kube: Kube) -> set[str]:
    """Every model name a user is shown: the gateway's /live/config (what the demo page starts with),
    /v1/models, and the LiveEngine's MODEL column."""
    config = platform.get_json(f"http://{kube.gateway}/live/config")
    models = platform.get_json(f"http://{kube.gateway}/v1/models")
    header, row = (line.split() for line in kube.kubectl("get", "le", "sim", "-o", "wide").splitlines())
    return {config["model"], *config["models"], *(m["id"] for m in models["data"]), dict(zip(header, row))["MODEL"]}


def test_kubectl_drives_liveengines_that_the_gateway_places_sessions_on(redis_url, tmp_path) -> None:
    with up(redis_url, tmp_path) as kube:
        kube.kubectl("apply", "-f", "-", stdin=ENGINE.format(name="sim", replicas=2, jitter=4))
        platform.eventually(lambda: kube.condition("sim", "Ready").get("status") == "True",
                            "READY True", deadline_s=60)
        assert "True" in kube.kubectl("get", "le")  # the printer columns

        async def scenario() -> None:
            first = await started(kube.gateway)
            platform.eventually(lambda: kube.get("le", "sim")["status"]["sessions"]["active"] == 1,
                                "the SESSIONS column to show the held session", deadline_s=30)
            kube.kubectl("scale", "le/sim", "--replicas=3")
            platform.eventually(lambda: len(kube.ready_pods("sim")) == 3, "three ready pods", deadline_s=60)
            second = await started(kube.gateway)  # spread: onto an empty pod, so two pods are busy
            # the two emptiest of three pods are marked, the idle one first (0 sessions) and a busy one
            platform.eventually(lambda: len(kube.costed("sim", EMPTIEST)) == 1
                                and len(kube.costed("sim", ONE_SESSION)) == 1, "the emptiest pods' deletion cost",
                                deadline_s=30)
            busy = kube.pod_names("sim") - kube.costed("sim", EMPTIEST)
            kube.kubectl("scale", "le/sim", "--replicas=2")  # platform §5: the emptiest pod goes
            platform.eventually(lambda: kube.pod_names("sim") == busy, "the emptiest pod removed", deadline_s=60)
            third = await started(kube.gateway)  # now 2 + 1 sessions on the two pods
            platform.eventually(lambda: list(kube.costs("sim").values()) == [ONE_SESSION]  # not a stale mark:
                                and list(kube.pod_sessions(kube.costs("sim")).values()) == [1],  # its pod has one
                                "of two pods, the one with one session marked", deadline_s=30)
            kube.kubectl("scale", "le/sim", "--replicas=1")  # the pod with one session drains: its call moves
            platform.eventually(lambda: len(kube.pod_names("sim")) == 1, "the drained pod gone once its call moved",
                                deadline_s=30)
            later = await started(kube.gateway)
            assert list(kube.pod_sessions(dict.fromkeys(kube.pod_names("sim"))).values()) == [4]  # 2 + 1 moved + 1
            for ws in (first, second, third, later):  # none was cut: each ends as its caller asks
                await closed(ws)
            names = advertised(kube)
            assert names == {"liveplex-sim", "gpt-live-1"}
            for model in sorted(names):  # each one a session can start with through the gateway
                await closed(await started(kube.gateway, model))
        asyncio.run(scenario())

        events = kube.kubectl("describe", "le", "sim").split("\nEvents:", 1)[1]  # each condition change, once
        assert events.count("AllReplicasReady") == 2 and "Ready=True: 3/3 replicas ready" in events, events
        log = (tmp_path / "up.log").read_text()  # what the terminal shows: no line of kopf's at info
        assert '"msg": "condition changed"' in log and '"level": "info", "logger": "kopf' not in log

        kube.kubectl("delete", "le", "sim")
        platform.eventually(lambda: not kube.get("deploy")["items"] and not kube.get("pods")["items"],
                            "the children to go with their LiveEngine", deadline_s=60)

        refused = subprocess.run(["kubectl", "--kubeconfig", str(kube.kubeconfig), "apply", "-f", "-"],
                                 input=ENGINE.format(name="bad", replicas=1, jitter=1), capture_output=True, text=True,
                                 timeout=60)  # the CRD's CEL rule refuses it at admission, as on a cluster
        assert refused.returncode != 0
        assert "spec.capacity.prebufferFrames must not exceed spec.capacity.jitterFrames" in refused.stderr


@pytest.mark.slow
def test_a_rollout_moves_every_call_and_drops_none(redis_url, tmp_path) -> None:
    """A new image rolls every pod (surge one, then drain one: platform §5.6); each draining pod's
    calls move to the others, and every caller hears every frame it sent, once, in order."""
    with up(redis_url, tmp_path) as kube:
        kube.kubectl("apply", "-f", "-", stdin=ENGINE.format(name="sim", replicas=2, jitter=4))
        platform.eventually(lambda: len(kube.ready_pods("sim")) == 2, "two ready pods", deadline_s=60)
        old = kube.pod_names("sim")

        async def scenario() -> list[StampedCall]:
            calls = [await StampedCall.start(f"ws://{kube.gateway}/v1/live/sessions") for _ in range(4)]
            kube.kubectl("patch", "le/sim", "--type=merge", "-p", '{"spec": {"image": {"tag": "rolled"}}}')
            await asyncio.to_thread(platform.eventually, lambda: not kube.pod_names("sim") & old
                                    and len(kube.ready_pods("sim")) == 2, "every pod replaced", 90)
            await asyncio.sleep(1.0)
            for call in calls:
                await call.stop()
            return calls

        calls = asyncio.run(scenario())
        assert all(call.unbroken() for call in calls), [(c.stamps[:3], c.sent, c.others[-2:]) for c in calls]
