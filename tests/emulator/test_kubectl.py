"""Real kubectl (/usr/bin/kubectl) against the emulator: apply, get with printer columns, scale, patch, delete."""

from __future__ import annotations

import asyncio
import json
import pathlib
import shutil

import pytest
import yaml

from liveplex.emulator import Emulator

from .conftest import until
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

    async def run(self, *args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", str(self.config), "--cache-dir", str(self.cache), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        return proc.returncode or 0, out.decode(), err.decode()

    async def __call__(self, *args: str) -> str:
        code, out, err = await self.run(*args)
        assert code == 0, f"kubectl {' '.join(args)} failed: {err}"
        assert "warning" not in err.lower(), err
        return out

    async def refused(self, *args: str) -> str:
        """kubectl's error output for a command the server refuses."""
        code, out, err = await self.run(*args)
        assert code != 0, f"kubectl {' '.join(args)} succeeded: {out}"
        return err


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


async def test_a_protobuf_body_is_refused_with_a_message_that_says_to_send_json(kubectl: Kubectl) -> None:
    err = await kubectl.refused("create", "namespace", "team")
    assert "Error from server (UnsupportedMediaType)" in err and "send application/json" in err
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    assert "namespace/team created" in await kubectl("create", "-f", kubectl.file("ns.yaml", namespace))


async def test_server_dry_run_admits_without_storing(cluster: Emulator, kubectl: Kubectl) -> None:
    manifest = kubectl.file("web.yaml", DEPLOYMENT)
    assert "deployment.apps/web created (server dry run)" in await kubectl("apply", "--dry-run=server", "-f", manifest)
    assert cluster.store.find(cluster.store.registry.by_key("apps/deployments"), "default", "web") is None
    broken = json.loads(json.dumps(DEPLOYMENT))
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 70000
    err = await kubectl.refused("apply", "--dry-run=server", "-f", kubectl.file("broken.yaml", broken))
    assert "Invalid value: 70000: must be between 1 and 65535, inclusive" in err
    await kubectl("apply", "-f", manifest)
    assert 'deployment.apps "web" deleted (server dry run)' in await kubectl("delete", "deploy", "web",
                                                                             "--dry-run=server")
    assert cluster.store.find(cluster.store.registry.by_key("apps/deployments"), "default", "web") is not None


async def test_lists_come_in_chunks_with_continue_tokens(cluster: Emulator, kubectl: Kubectl) -> None:
    maps = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{n}"}, "data": {"n": str(n)}}
            for n in range(5)]
    await kubectl("apply", "-f", kubectl.file("maps.yaml", *maps))
    listed = await kubectl("get", "configmaps", "--chunk-size=2", "-o", "name")
    assert listed.split() == [f"configmap/c{n}" for n in range(5)]


async def test_server_side_apply_is_refused_rather_than_approximated(cluster: Emulator, kubectl: Kubectl) -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}
    err = await kubectl.refused("apply", "--server-side", "-f", kubectl.file("cm.yaml", config_map))
    assert "Server-side apply not available on the server" in err and "without --server-side" in err
    assert cluster.store.find(cluster.store.registry.by_key("/configmaps"), "default", "c") is None


async def test_kubectl_create_token_and_auth_can_i(cluster: Emulator, kubectl: Kubectl, tmp_path: pathlib.Path) -> None:
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}}
    await kubectl("apply", "-f", kubectl.file("sa.yaml", account))
    token = (await kubectl("create", "token", "bot")).strip()
    assert token
    assert (await kubectl("auth", "can-i", "delete", "crds", "--all-namespaces")).strip() == "yes"
    as_bot = ["--token", token]
    code, out, _ = await kubectl.run(*as_bot, "auth", "can-i", "list", "pods")
    assert (code, out.strip()) == (1, "no")
    err = await kubectl.refused(*as_bot, "get", "pods")
    assert 'User "system:serviceaccount:default:bot" cannot list resource "pods"' in err
    err = await kubectl.refused("--token", "made-up", "get", "pods")
    assert "You must be logged in to the server" in err


async def test_rollout_undo_brings_the_old_replicaset_back_under_the_next_revision(
        cluster: Emulator, kubectl: Kubectl) -> None:
    store = cluster.store
    sets = store.registry.by_key("apps/replicasets")

    def revisions() -> dict[str, str]:
        return {rs["metadata"]["name"]: rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                for rs in store.list(sets, "default")[0]}

    await kubectl("apply", "-f", kubectl.file("web.yaml", DEPLOYMENT))
    first = await until(store, lambda: list(revisions()) if revisions() else None)
    changed = json.loads(json.dumps(DEPLOYMENT))
    changed["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "B", "value": "2"}]
    await kubectl("apply", "-f", kubectl.file("web2.yaml", changed))
    await until(store, lambda: len(revisions()) == 2)
    assert "rolled back" in await kubectl("rollout", "undo", "deployment/web")
    await until(store, lambda: revisions()[first[0]] == "3")
    assert len(revisions()) == 2  # the first ReplicaSet is reused, no third one is made
    deploy = store.get(store.registry.by_key("apps/deployments"), "default", "web")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
