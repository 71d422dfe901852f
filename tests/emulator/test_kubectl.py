"""Real kubectl (/usr/bin/kubectl) against the emulator: apply, get with printer columns, scale, patch, delete."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil

import pytest
import yaml

from liveplex.emulator import Emulator

from .objects import WIDGET_CRD, widget

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
pytestmark = pytest.mark.skipif(not pathlib.Path(KUBECTL).exists(), reason="needs kubectl")

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "ghcr.io/example/liveplex:0.1.0", "args": ["serve"],
                                 "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 8000}],
                                 "readinessProbe": {"httpGet": {"path": "/ready", "port": 8000}}}]}}},
}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 8000}]}}


class Kubectl:
    """kubectl with its own kubeconfig and discovery cache, run without blocking the emulator's loop."""

    def __init__(self, emulator: Emulator, tmp: pathlib.Path) -> None:
        self.config = emulator.write_kubeconfig(tmp / "kubeconfig")
        self.cache = tmp / "cache"
        self.tmp = tmp

    def file(self, name: str, *objects: dict) -> str:
        """A multi-document YAML manifest (a `kind: List` would make kubectl want OpenAPI v2)."""
        path = self.tmp / name
        path.write_text(yaml.safe_dump_all(objects))
        return str(path)

    async def __call__(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(self.config), "--cache-dir", str(self.cache), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
        assert "warning" not in err.decode().lower(), err.decode()
        return out.decode()


@pytest.fixture
async def kubectl(cluster: Emulator, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(cluster, tmp_path)


async def test_kubectl_applies_gets_scales_patches_and_deletes_a_custom_resource(
        cluster: Emulator, kubectl: Kubectl) -> None:
    assert "created" in await kubectl("apply", "-f", kubectl.file("crd.yaml", WIDGET_CRD))
    assert "widget.test.liveplex.io/a created" in await kubectl("apply", "-f", kubectl.file("a.yaml",
                                                                                              widget("a", replicas=2)))
    table = (await kubectl("get", "wd")).splitlines()
    assert table[0].split() == ["NAME", "REPLICAS", "COLOR", "READY", "AGE"]
    assert table[1].split()[:3] == ["a", "2", "red"]
    assert "scaled" in await kubectl("scale", "wd/a", "--replicas=3")
    assert "patched" in await kubectl("patch", "wd", "a", "--type=merge", "-p", '{"spec":{"color":"blue"}}')
    widgets = cluster.store.registry.by_key("test.liveplex.io/widgets")
    assert cluster.store.get(widgets, "default", "a")["spec"] == {"replicas": 3, "color": "blue"}
    assert json.loads(await kubectl("get", "wd", "a", "-o", "json"))["spec"]["replicas"] == 3
    assert 'widget.test.liveplex.io "a" deleted' in await kubectl("delete", "wd", "a")
    assert cluster.store.find(widgets, "default", "a") is None


async def test_applying_a_deployment_and_a_service_twice_leaves_them_unchanged(
        cluster: Emulator, kubectl: Kubectl) -> None:
    manifest = kubectl.file("web.yaml", DEPLOYMENT, SERVICE)
    first = await kubectl("apply", "-f", manifest)
    assert first.split("\n")[:2] == ["deployment.apps/web created", "service/web created"]
    second = await kubectl("apply", "-f", manifest)
    assert second.split("\n")[:2] == ["deployment.apps/web unchanged", "service/web unchanged"]
    changed = json.loads(json.dumps(DEPLOYMENT))
    changed["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "B", "value": "2"}]
    assert "configured" in await kubectl("apply", "-f", kubectl.file("web2.yaml", changed))
    deploy = cluster.store.get(cluster.store.registry.by_key("apps/deployments"), "default", "web")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}]
    assert deploy["metadata"]["generation"] == 2
