"""The kubelet's podman runtime, decided purely: an operator-rendered (hardened) engine pod becomes
the `podman run` line a kubelet would make, volumes get their host side, and what a kubelet
refuses is refused with its reason."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from liveplex.emulator.controllers import podman, podspec
from liveplex.operator import render, spec
from liveplex.operator.settings import OperatorSettings
from tests.operator import objects

SETTINGS = OperatorSettings(image_repository="localhost/liveplex", engine_image_repository="localhost/liveplex-engine",
                            image_tag="test")


def _pod(body: dict[str, Any] | None = None) -> dict[str, Any]:
    le = spec.parse(body or objects.liveengine(objects.personaplex_spec(model={
        "name": "tiny", "source": {"fetch": {"url": "hf://org/tiny", "claimName": "weights", "path": "tiny"}}})))
    template = render.render_deployment(le, SETTINGS)["spec"]["template"]
    return {"metadata": {"name": "pp-abc12", "namespace": "voice", **template["metadata"]}, "spec": template["spec"]}


def _lookup(objects_: dict[tuple[str, str], dict]) -> podspec.Lookup:
    return lambda key, namespace, name: objects_.get((key, name))


def test_a_hardened_engine_pod_runs_as_its_user_on_a_read_only_root(tmp_path: Path) -> None:
    pod = _pod()
    volumes = podman.plan_volumes(pod, tmp_path / "pod", tmp_path / "claims", _lookup({}))
    assert not isinstance(volumes, podspec.Unrunnable)
    assert volumes["model"] == podman.Volume(tmp_path / "claims" / "voice" / "weights")
    assert volumes["dshm"] == podman.Volume(None)
    assert volumes["tmp"] == podman.Volume(tmp_path / "pod" / "volumes" / "tmp")
    engine = pod["spec"]["containers"][0]
    line = podman.run_argv(pod, engine, {"POD_IP": "127.3.4.5", "POD_NAME": "pp-abc12"}, volumes, "65532:65532",
                           {"/state/sa.kubeconfig": "/state/sa.kubeconfig"})
    assert not isinstance(line, podspec.Unrunnable)
    text = " ".join(line)
    assert line[:6] == ["podman", "run", "--rm", "--name", "lpemu-voice-pp-abc12-engine", "--network"]
    for flags in ("--user 65532:65532", "--group-add 65532", "--read-only --read-only-tmpfs=false",
                  "--cap-drop ALL", "--security-opt no-new-privileges", "--tmpfs /dev/shm:rw,nosuid,nodev",
                  f"-v {tmp_path}/claims/voice/weights:/models:ro", f"-v {tmp_path}/pod/volumes/tmp:/tmp",
                  "-v /state/sa.kubeconfig:/state/sa.kubeconfig:ro", "-e POD_IP=127.3.4.5",
                  "--entrypoint liveplex localhost/liveplex-engine:test serve --engine personaplex --host 127.3.4.5"):
        assert flags in text, flags
    init = pod["spec"]["initContainers"][0]
    init_line = podman.run_argv(pod, init, {}, volumes, "65532:65532", termination_log=tmp_path / "t.log")
    assert f"-v {tmp_path}/claims/voice/weights:/models " in " ".join(init_line) + " "  # the init container writes
    assert f"-v {tmp_path}/t.log:/dev/termination-log " in " ".join(init_line)  # fetch-model's reason


def test_a_termination_message_is_what_the_container_wrote_else_its_logs_tail_when_asked() -> None:
    fallback = {"terminationMessagePolicy": "FallbackToLogsOnError"}
    assert podspec.termination_message({}, 1, "fetch-model: bad token", "log") == "fetch-model: bad token"
    assert podspec.termination_message({}, 1, "", "log") == ""
    assert podspec.termination_message(fallback, 0, "", "log") == ""
    log = "".join(f"line {i}\n" for i in range(100))
    assert podspec.termination_message(fallback, 1, "", log) == "".join(f"line {i}\n" for i in range(20, 100))
    assert len(podspec.termination_message({}, 1, "x" * 5000, "")) == 4096


def test_run_as_non_root_refuses_a_root_image_as_a_kubelet_does(tmp_path: Path) -> None:
    pod = _pod()
    del pod["spec"]["securityContext"]["runAsUser"]
    volumes = podman.plan_volumes(pod, tmp_path, tmp_path, _lookup({}))
    assert not isinstance(volumes, podspec.Unrunnable)
    for root in ("", "0", "root:root"):
        refused = podman.run_argv(pod, pod["spec"]["containers"][0], {}, volumes, root)
        assert refused == podspec.Unrunnable(podspec.CONFIG_ERROR,
                                             "container has runAsNonRoot and image will run as root")
    assert not isinstance(podman.run_argv(pod, pod["spec"]["containers"][0], {}, volumes, "65532"), podspec.Unrunnable)


def test_config_map_and_secret_volumes_become_files_and_unknown_ones_are_refused(tmp_path: Path) -> None:
    pod = {"metadata": {"name": "p", "namespace": "voice"}, "spec": {"containers": [], "volumes": [
        {"name": "keys", "secret": {"secretName": "api-keys"}}, {"name": "conf", "configMap": {"name": "c"}}]}}
    found = _lookup({("secrets", "api-keys"): {"data": {"keys": base64.b64encode(b"k1\n").decode()}},
                     ("configmaps", "c"): {"data": {"a.yaml": "x: 1"}}})
    volumes = podman.plan_volumes(pod, tmp_path, tmp_path, found)
    assert not isinstance(volumes, podspec.Unrunnable)
    assert volumes["keys"].files == {"keys": b"k1\n"} and volumes["keys"].read_only
    assert volumes["conf"].files == {"a.yaml": b"x: 1"}
    missing = podman.plan_volumes(pod, tmp_path, tmp_path, _lookup({}))
    assert isinstance(missing, podspec.Unrunnable) and missing.reason == podspec.CONFIG_ERROR
    assert "secret 'api-keys' not found" in missing.message
    nfs = {**pod, "spec": {"volumes": [{"name": "n", "nfs": {"server": "x", "path": "/"}}]}}
    assert podman.plan_volumes(nfs, tmp_path, tmp_path, found) == podspec.Unrunnable(
        podspec.CONFIG_ERROR, "volume 'n': the emulator cannot mount nfs volumes")


def test_a_missing_image_is_err_image_pull_then_back_off() -> None:
    first, later = podman.pull_refusal("localhost/nope:1", 1), podman.pull_refusal("localhost/nope:1", 2)
    assert (first.reason, later.reason) == ("ErrImagePull", "ImagePullBackOff")
    assert first.message.startswith('Failed to pull image "localhost/nope:1"')


def test_up_offers_the_kubelet_runtimes() -> None:
    from liveplex import up
    [runtime] = [a for a in up.build_parser()._actions if a.dest == "runtime"]
    assert tuple(runtime.choices) == podman.RUNTIMES


def test_a_pods_service_account_is_mounted_where_in_cluster_config_reads_it_unless_automount_is_off() -> None:
    from liveplex.emulator.controllers import projection

    creds = projection.Credentials("t0k", "voice", b"PEM", "127.0.0.1", 6443)
    assert projection.files(creds) == {"token": b"t0k", "ca.crt": b"PEM", "namespace": b"voice"}
    assert projection.service_env(creds)["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert projection.service_env(creds)["KUBERNETES_SERVICE_PORT"] == "6443"
    pod = {"spec": {}}
    assert projection.automount(pod, None) and projection.automount(pod, {"automountServiceAccountToken": True})
    assert not projection.automount(pod, {"automountServiceAccountToken": False})
    assert projection.automount({"spec": {"automountServiceAccountToken": True}},
                                {"automountServiceAccountToken": False})
    assert not projection.automount({"spec": {"automountServiceAccountToken": False}}, None)
    assert projection.account_name(pod) == "default"
    config = projection.process_kubeconfig(creds, Path("/state/ca.crt"))
    assert 'certificate-authority: "/state/ca.crt"' in config and "certificate-authority-data" not in config


def test_services_resolve_to_their_own_address_and_route_to_ready_endpoints_on_the_slices_port() -> None:
    from liveplex.emulator.controllers import services

    def svc(ns: str, name: str, ports: list[dict], **spec: Any) -> dict:
        return {"metadata": {"namespace": ns, "name": name}, "spec": {"ports": ports, **spec}}
    redis = svc("voice", "redis", [{"name": "redis", "port": 6379}])
    gateway = svc("voice", "gw", [{"name": "http", "port": 80, "targetPort": "http"}])
    api = svc("default", "kubernetes", [{"name": "https", "port": 443, "targetPort": 6443}])
    headless = svc("voice", "h", [{"port": 1}], clusterIP="None")
    slices = [{"metadata": {"namespace": "voice", "labels": {"kubernetes.io/service-name": "gw"}},
               "ports": [{"name": "http", "port": 8080}],
               "endpoints": [{"addresses": ["127.0.9.1"], "conditions": {"ready": True}},
                             {"addresses": ["127.0.9.2"], "conditions": {"ready": False}}]}]
    assert services.proxied([redis, gateway, api, headless]) == {
        ("voice", "redis"): [6379], ("voice", "gw"): [80], ("default", "kubernetes"): [443]}
    assert services.routes([redis, gateway, api], slices, ("127.0.0.1", 40000)) == {
        (("voice", "redis"), 6379): [], (("voice", "gw"), 80): [("127.0.9.1", 8080)],
        (("default", "kubernetes"), 443): [("127.0.0.1", 40000)]}
    hosts = services.hosts("voice", "gw-abc", "127.0.9.1", {("voice", "gw"): "127.0.5.5",
                                                            ("default", "kubernetes"): "127.0.5.6"})
    assert "127.0.9.1\tgw-abc\n" in hosts
    assert "127.0.5.5\tgw.voice.svc.cluster.local\tgw.voice.svc\tgw.voice\tgw\n" in hosts
    assert "127.0.5.6\tkubernetes.default.svc.cluster.local\tkubernetes.default.svc\tkubernetes.default\n" in hosts
