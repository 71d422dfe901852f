"""What the kubelet reads from a pod: `$(VAR)` rules, env sources, the image mapping, probe handlers."""

from __future__ import annotations

import base64

import pytest

from liveplex.emulator.controllers import podspec

POD = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}, "annotations": {"a": "1"}},
       "spec": {"nodeName": "n"}, "status": {"podIP": "127.0.3.4"}}
OBJECTS = {("/secrets", "ns", "s"): {"data": {"token": base64.b64encode(b"hunter2").decode()}},
           ("/configmaps", "ns", "c"): {"data": {"mode": "fast", "level": "3"}}}


def lookup(key: str, namespace: str, name: str) -> dict | None:
    return OBJECTS.get((key, namespace, name))


@pytest.mark.parametrize(("text", "out"), [
    ("$(A)", "x"), ("$(A)-$(B)", "x-y"), ("$$(A)", "$(A)"), ("$(MISSING)", "$(MISSING)"), ("$A", "$A"),
    ("$$", "$"), ("$(A", "$(A"),
])
def test_variable_references_expand_by_kubernetes_rules(text: str, out: str) -> None:
    assert podspec.expand(text, {"A": "x", "B": "y"}) == out


def test_env_resolves_every_source_in_order() -> None:
    container = {"envFrom": [{"configMapRef": {"name": "c"}, "prefix": "CM_"}], "env": [
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "URL", "value": "http://$(IP):8000"},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "mode"}}},
        {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nope", "optional": True}}},
    ]}
    assert podspec.environment(POD, container, lookup) == {
        "CM_mode": "fast", "CM_level": "3", "IP": "127.0.3.4", "URL": "http://127.0.3.4:8000", "APP": "web",
        "NS": "ns", "TOKEN": "hunter2", "MODE": "fast"}


def test_a_missing_secret_key_is_a_create_container_config_error() -> None:
    env = podspec.environment(POD, {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
                              lookup)
    assert isinstance(env, podspec.Unrunnable) and env.reason == podspec.CONFIG_ERROR


def test_the_liveplex_image_runs_the_local_liveplex_command() -> None:
    container = {"image": "ghcr.io/example/liveplex:0.1.0", "command": ["liveplex"],
                 "args": ["serve", "--host", "$(IP)"]}
    assert podspec.argv(container, "127.0.3.4", {"IP": "127.0.3.4"}, "/py") == [
        "/py", "-m", "liveplex.cli", "serve", "--host", "127.0.3.4"]
    assert podspec.argv({"image": "liveplex@sha256:ab", "args": ["gateway"]}, "ip", {}, "/py") == [
        "/py", "-m", "liveplex.cli", "gateway"]


def test_the_redis_image_runs_redis_server_bound_to_the_pod_address() -> None:
    assert podspec.argv({"image": "docker.io/library/redis:7", "args": ["--port", "6379"]}, "127.0.3.4", {}, "/py") \
        == ["redis-server", "--port", "6379", "--bind", "127.0.3.4"]


def test_any_other_image_cannot_run_and_says_why() -> None:
    out = podspec.argv({"image": "nginx:1.27"}, "ip", {}, "/py")
    assert isinstance(out, podspec.Unrunnable) and out.reason == podspec.NEVER_PULL and "nginx:1.27" in out.message


def test_probe_handlers_resolve_named_ports_and_the_pod_address() -> None:
    container = {"ports": [{"name": "http", "containerPort": 8000}]}
    probe = podspec.probe({"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 2}, container, "127.0.3.4")
    assert probe is not None and probe.action == podspec.Action("http", "127.0.3.4", 8000, "/ready")
    assert (probe.period, probe.failure_threshold, probe.timeout) == (2.0, 3, 1.0)
    assert podspec.probe({"grpc": {"port": 9}}, container, "ip") is None
