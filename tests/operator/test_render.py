"""The children: goldens, determinism, selectors, Kubernetes' schemas, and a command line `liveplex serve` accepts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.operator import crd, names, render, spec
from liveplex.operator.settings import OperatorSettings, PodDefaults, SecretKey
from tests.operator import golden, kubeschemas, objects
from tests.support import pod_security

REDIS = OperatorSettings(redis_url="redis://redis.liveplex:6379/0")
SECRET = OperatorSettings(redis_url="redis://redis.liveplex:6379/0", redis_secret=SecretKey("liveplex-redis"))
DEFAULTS = OperatorSettings(redis_url="redis://redis.liveplex:6379/0", pod_defaults=PodDefaults(
    runtime_class_name="nvidia", priority_class_name="gpu-serving", image_pull_secrets=("regcred",)))
"""The chart's engine defaults set: a LiveEngine's own spec.pod values win over them."""
IMAGE_VOLUMES_SINCE = "1.31"
"""The first minor with `volumes[].image` (ImageVolume); kubernetes-validate knows it from there on."""

CASES: dict[str, tuple[dict[str, Any], OperatorSettings]] = {
    "sim": (objects.example("sim"), REDIS),
    "personaplex": (objects.example("personaplex"), SECRET),
    "personaplex-hostpath": (objects.liveengine(objects.personaplex_spec(
        model={"name": "nvidia/personaplex-7b-v1", "source": {"hostPath": {"path": "/srv/personaplex"}}},
        image={"repository": "registry.local/liveplex", "tag": "dev", "pullPolicy": "Always"},
        pod={"labels": {"team": "voice"}, "annotations": {"prometheus.io/scrape": "true"},
             "env": [{"name": "HF_HOME", "value": "/cache/hf"}], "priorityClassName": "gpu-serving",
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                 {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]}}}})), REDIS),
    "personaplex-image": (objects.liveengine(objects.personaplex_spec(
        model={"name": "nvidia/personaplex-7b-v1", "dtype": "fp32", "kvDtype": "fp8", "attention": "masked",
               "prefillBudgetMillis": 12,
               "source": {"image": {"reference": "registry.local/weights:7b", "path": "ckpt"}}},
        placement={"subPools": 4})), REDIS),
    "sim-standalone": (objects.liveengine(objects.sim_spec(pacing={"leadMillis": 0, "spreadMillis": 8},
                                                           continuity={"reattachGraceSeconds": 0},
                                                           pause={"idleSeconds": 3, "vadThresholdPercent": 35,
                                                                  "wakeReserve": 4, "maxPaused": 64,
                                                                  "hostBudgetGiB": 512}),
                                          labels={"team": "qa"}), OperatorSettings()),
    "personaplex-fetch-hf": (objects.liveengine(objects.personaplex_spec(
        model={"name": "nvidia/personaplex-7b-v1", "source": {"fetch": {
            "url": "hf://nvidia/personaplex-7b-v1@3f1c2a9", "tokenSecret": {"name": "hf-token"},
            "claimName": "weights", "path": "personaplex-7b",
            "sha256": {"model.safetensors": "ab" * 32, "tokenizer.model": "cd" * 32}}}},
        pod={"runtimeClassName": "nvidia-cdi", "imagePullSecrets": [],
             "env": [{"name": "HF_ENDPOINT", "value": "https://hub-mirror.example"}]})), DEFAULTS),
    "personaplex-fetch-https": (objects.liveengine(objects.personaplex_spec(
        model={"name": "nvidia/personaplex-7b-v1", "source": {"fetch": {
            "url": "https://weights.example/personaplex-7b.tar.gz"}}})), DEFAULTS),
}


def _children(case: str) -> list[dict[str, Any]]:
    body, s = CASES[case]
    return render.render_children(spec.parse(body), s)


@pytest.mark.parametrize("case", CASES)
def test_children_equal_their_golden_files(case: str) -> None:
    golden.assert_golden(f"children-{case}", _children(case))


@pytest.mark.parametrize("case", CASES)
def test_rendering_twice_is_identical(case: str) -> None:
    first = _children(case)
    snapshot = copy.deepcopy(first)
    first[0]["spec"]["template"]["spec"]["containers"][0]["args"].clear()
    assert _children(case) == snapshot


@pytest.mark.parametrize("case", CASES)
def test_every_child_validates_strictly_at_the_lowest_and_newest_minor(case: str) -> None:
    lowest = IMAGE_VOLUMES_SINCE if case.endswith("-image") else kubeschemas.LOWEST
    for child in _children(case):
        for version in (lowest, kubeschemas.NEWEST):
            kubeschemas.validate_strict(child, version)


def test_an_image_volume_is_refused_before_its_minor_strict_validation_can_fail() -> None:
    deployment = _children("personaplex-image")[0]
    with pytest.raises(Exception, match="image"):
        kubeschemas.validate_strict(deployment, kubeschemas.LOWEST)


_label_keys = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz-./"), min_size=1, max_size=20).filter(
    lambda k: k not in names.SELECTOR_KEYS)


@settings(max_examples=50, deadline=None)
@given(pod_labels=st.dictionaries(_label_keys, st.sampled_from(["a", "b", "liveengine"]), max_size=4),
       parent_labels=st.dictionaries(_label_keys, st.sampled_from(["a", "b"]), max_size=4))
def test_selectors_never_use_user_labels(pod_labels: dict[str, str], parent_labels: dict[str, str]) -> None:
    le = spec.parse(objects.liveengine(objects.sim_spec(pod={"labels": pod_labels}), labels=parent_labels))
    deployment, service, pdb = render.render_children(le, REDIS)
    fixed = names.selector(le.name)
    assert deployment["spec"]["selector"] == {"matchLabels": fixed} == pdb["spec"]["selector"]
    assert service["spec"]["selector"] == fixed
    template = deployment["spec"]["template"]["metadata"]["labels"]
    assert template == {**pod_labels, **fixed}
    assert all(child["metadata"]["labels"].items() >= {**parent_labels, **fixed}.items()
               for child in (deployment, service, pdb))


def test_children_are_owned_by_the_liveengine_as_controller() -> None:
    for child in _children("sim"):
        assert child["metadata"]["ownerReferences"] == [{
            "apiVersion": names.API_VERSION, "kind": names.KIND, "name": "sim", "uid": "",
            "controller": True, "blockOwnerDeletion": True}]
        assert child["metadata"]["namespace"] == "default"


def _container(case: str) -> dict[str, Any]:
    return _children(case)[0]["spec"]["template"]["spec"]["containers"][0]


def test_the_pod_runs_liveplex_serve_with_the_pool_flags() -> None:
    c = _container("sim")
    assert c["name"] == "engine" and c["command"] == ["liveplex"]
    assert c["args"][:2] == ["serve", "--engine"]
    flags = dict(zip(c["args"][1::2], c["args"][2::2]))
    assert flags["--pool"] == "default/sim" and "--redis-url" not in flags  # the URL (a password) only in the env
    assert flags["--advertise"] == "ws://$(POD_IP):8000" and flags["--host"] == "$(POD_IP)"
    assert flags["--pod-name"] == "$(POD_NAME)" and flags["--drain-deadline-s"] == "300"
    assert flags["--lateness-budget-ms"] == "20"
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["LIVEPLEX_REDIS_URL"] == {"name": "LIVEPLEX_REDIS_URL", "value": "redis://redis.liveplex:6379/0"}


def test_the_redis_url_comes_from_the_secret_when_one_is_named() -> None:
    env = {e["name"]: e for e in _container("personaplex")["env"]}
    assert env["LIVEPLEX_REDIS_URL"]["valueFrom"] == {"secretKeyRef": {"name": "liveplex-redis", "key": "url"}}


def test_without_redis_the_pod_runs_standalone() -> None:
    c = _container("sim-standalone")
    assert "--redis-url" not in c["args"] and "--pool" not in c["args"]
    assert "LIVEPLEX_REDIS_URL" not in {e["name"] for e in c["env"]}


def test_probes_drain_and_grace_follow_the_spec() -> None:
    deployment = _children("personaplex")[0]
    pod = deployment["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready" and c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] == 1800
    assert c["lifecycle"]["preStop"]["httpGet"] == {"path": "/drain?deadline_s=600", "port": "admin"}
    assert pod["terminationGracePeriodSeconds"] == 630
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def test_the_reattach_grace_window_is_the_pods_flag_15_s_unless_the_spec_says() -> None:
    for case, seconds in (("sim", "15"), ("personaplex", "15"), ("sim-standalone", "0")):
        args = _container(case)["args"]
        assert args[args.index("--reattach-grace-s") + 1] == seconds, case
    le = spec.parse(objects.liveengine(objects.sim_spec(continuity={"reattachGraceSeconds": 300})))
    args = render.serve_args(le, REDIS)
    assert args[args.index("--reattach-grace-s") + 1] == "300"
    pod = render.render_deployment(le, REDIS)["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 600 + render.GRACE_MARGIN_S  # the drain's, not the window's


def test_the_crds_reattach_bounds_are_the_pods_own() -> None:
    from liveplex.pod.settings import MAX_REATTACH_GRACE_S, PodSettings
    assert crd.MAX_REATTACH_GRACE_SECONDS == MAX_REATTACH_GRACE_S
    assert crd.DEFAULT_REATTACH_GRACE_SECONDS == PodSettings().reattach_grace_s


def _flags(args: list[str], *names_: str) -> tuple[str, ...]:
    return tuple(args[args.index(flag) + 1] for flag in names_)


PAUSE_FLAGS = ("--idle-pause-s", "--vad-threshold", "--wake-reserve", "--max-paused", "--pause-host-budget-bytes")


def test_the_idle_pause_is_off_for_websocket_sessions_unless_the_spec_opts_the_pool_in() -> None:
    for case in ("sim", "personaplex"):  # defaults: WebRTC's wake policy honoured, WebSocket never paused
        assert _flags(_container(case)["args"], *PAUSE_FLAGS) == ("0", "0.5", "2", "256", "0"), case
    assert _flags(_container("sim-standalone")["args"], *PAUSE_FLAGS) == ("3", "0.35", "4", "64", str(512 << 30))
    for percent, shown in ((0, "0.0"), (100, "1.0"), (7, "0.07")):
        le = spec.parse(objects.liveengine(objects.sim_spec(pause={"vadThresholdPercent": percent})))
        assert _flags(render.serve_args(le, REDIS), "--vad-threshold") == (shown,)


def test_the_crds_pause_bounds_and_defaults_are_the_pods_own() -> None:
    from liveplex.gptlive.events import MAX_IDLE_TIMEOUT_S
    from liveplex.pod.pause import PauseSettings
    d = PauseSettings()
    assert crd.MAX_IDLE_PAUSE_SECONDS == MAX_IDLE_TIMEOUT_S
    assert (crd.DEFAULT_VAD_THRESHOLD_PERCENT / 100, crd.DEFAULT_WAKE_RESERVE, crd.DEFAULT_MAX_PAUSED) == (
        d.vad_threshold, d.wake_reserve, d.max_paused)
    pause = crd.SPEC["properties"]["pause"]["properties"]
    assert d.idle_timeout_s == 0 == pause["idleSeconds"]["default"]
    assert d.host_budget_bytes == 0 == pause["hostBudgetGiB"]["default"]


@pytest.mark.parametrize(("field", "value"), [("idleSeconds", -1), ("idleSeconds", 3601), ("vadThresholdPercent", 101),
                                              ("vadThresholdPercent", 0.5), ("wakeReserve", -1), ("maxPaused", -1),
                                              ("maxPaused", "256"), ("hostBudgetGiB", -1), ("hostBudgetGiB", 0.5)])
def test_a_pause_setting_out_of_range_is_refused(field: str, value: object) -> None:
    body = objects.liveengine(objects.sim_spec(pause={field: value}))
    with pytest.raises(spec.SpecError) as caught:
        spec.parse(body)
    assert caught.value.paths == (f"spec.pause.{field}",)
    assert not kubeschemas.validator(crd.object_schema()).is_valid(body)


@pytest.mark.parametrize(("idle", "vad", "reserve", "paused", "gib"),
                         [(1, 0, 0, 1, 0), (3600, 100, 1024, 1, 4096), (0, 50, 2, 0, 1)])
def test_the_pod_accepts_every_pause_the_crd_accepts_at_its_bounds(idle: int, vad: int, reserve: int,
                                                                   paused: int, gib: int) -> None:
    from liveplex import serve
    from liveplex.pod import settings as pod_settings
    pause = {"idleSeconds": idle, "vadThresholdPercent": vad, "wakeReserve": reserve, "maxPaused": paused,
             "hostBudgetGiB": gib}
    args = render.serve_args(spec.parse(objects.liveengine(objects.sim_spec(pause=pause))), OperatorSettings())
    got = pod_settings.settings_from_args(serve.build_parser().parse_args(args[1:]), {}).pause
    assert (got.idle_timeout_s, got.vad_threshold, got.wake_reserve, got.max_paused, got.host_budget_bytes) == (
        idle, vad / 100, reserve, paused, gib << 30)


@pytest.mark.parametrize("seconds", [-1, 301, 1.5, "15"])
def test_a_reattach_grace_window_out_of_range_is_refused(seconds: object) -> None:
    body = objects.liveengine(objects.sim_spec(continuity={"reattachGraceSeconds": seconds}))
    with pytest.raises(spec.SpecError) as caught:
        spec.parse(body)
    assert caught.value.paths == ("spec.continuity.reattachGraceSeconds",)
    assert not kubeschemas.validator(crd.object_schema()).is_valid(body)  # as the API server refuses it


def test_gpus_only_for_personaplex_and_the_model_mounted_read_only() -> None:
    pp, sim = _container("personaplex"), _container("sim")
    assert pp["resources"]["limits"]["nvidia.com/gpu"] == "1" and "nvidia.com/gpu" not in str(sim)
    assert pp["volumeMounts"][-1] == {"name": "model", "mountPath": "/models", "readOnly": True}
    volumes = _children("personaplex")[0]["spec"]["template"]["spec"]["volumes"]
    assert volumes[-1] == {"name": "model", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}}
    assert "model" not in str(sim["volumeMounts"])


def test_pods_are_hardened_and_write_only_to_their_empty_dirs() -> None:
    for case in CASES:
        pod = _children(case)[0]["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert {m["mountPath"] for m in c["volumeMounts"]} >= {"/tmp", "/var/cache/liveplex"}
        shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
        assert shm["emptyDir"]["medium"] == "Memory"


def test_fetch_sources_get_an_init_container_writing_the_volume_the_engine_reads() -> None:
    pod = _children("personaplex-fetch-hf")[0]["spec"]["template"]["spec"]
    (init,), (engine,) = pod["initContainers"], pod["containers"]
    assert init["image"] == engine["image"] == "ghcr.io/liveplex/liveplex-engine:0.1.0"
    assert init["args"][:4] == ["fetch-model", "hf://nvidia/personaplex-7b-v1@3f1c2a9", "--dest",
                                "/models/personaplex-7b"]
    assert engine["args"][engine["args"].index("--model-path") + 1] == "/models/personaplex-7b"
    assert {"name": "model", "mountPath": "/models"} in init["volumeMounts"]
    assert {"name": "model", "mountPath": "/models", "readOnly": True} in engine["volumeMounts"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "weights"}} in pod["volumes"]
    assert init["env"] == [{"name": "LIVEPLEX_FETCH_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
                           {"name": "HF_ENDPOINT", "value": "https://hub-mirror.example"}]
    https = _children("personaplex-fetch-https")[0]["spec"]["template"]["spec"]
    assert {"name": "model", "emptyDir": {}} in https["volumes"] and "env" not in https["initContainers"][0]


def test_the_fetch_command_line_is_one_fetch_model_accepts() -> None:
    from liveplex import fetch_model
    init = _children("personaplex-fetch-hf")[0]["spec"]["template"]["spec"]["initContainers"][0]
    args = fetch_model.build_parser().parse_args(init["args"][1:])
    assert fetch_model.parse_source(args.source) == fetch_model.HubSource("nvidia/personaplex-7b-v1", "3f1c2a9")
    assert fetch_model.parse_checksums(args.sha256) == {"model.safetensors": "ab" * 32, "tokenizer.model": "cd" * 32}
    assert init["env"][0]["name"] == fetch_model.TOKEN_ENV


def test_pod_defaults_apply_where_the_spec_leaves_them_unset() -> None:
    hf = _children("personaplex-fetch-hf")[0]["spec"]["template"]["spec"]
    https = _children("personaplex-fetch-https")[0]["spec"]["template"]["spec"]
    assert (hf["runtimeClassName"], hf["priorityClassName"], "imagePullSecrets" in hf) == (
        "nvidia-cdi", "gpu-serving", False)  # the spec's own runtime class and its explicit empty list win
    assert (https["runtimeClassName"], https["imagePullSecrets"]) == ("nvidia", [{"name": "regcred"}])
    assert "runtimeClassName" not in _children("sim")[0]["spec"]["template"]["spec"]


@pytest.mark.parametrize(("case", "path"), [("personaplex", "/models/personaplex-7b"),
                                            ("personaplex-hostpath", "/models"),
                                            ("personaplex-image", "/models/ckpt")])
def test_the_model_path_points_into_the_mount(case: str, path: str) -> None:
    args = _container(case)["args"]
    assert args[args.index("--model-path") + 1] == path


def test_the_image_defaults_to_the_operators_version() -> None:
    from liveplex import __version__
    assert _container("sim")["image"] == f"ghcr.io/liveplex/liveplex:{__version__}"
    assert _container("personaplex-hostpath")["image"] == "registry.local/liveplex:dev"


def test_the_crds_sim_defaults_are_the_sims_own() -> None:
    from liveplex.sim_pod.profile import SimProfile
    sim = spec.parse(objects.liveengine({"engine": {"kind": "sim", "sim": {}}})).spec.sim
    d = SimProfile()
    assert (sim.tick_base_micros, sim.tick_per_session_micros, sim.echo_frames) == (
        d.tick_base_us, d.tick_per_session_us, d.echo_frames)


@pytest.mark.parametrize("case", CASES)
def test_liveplex_serve_accepts_the_rendered_command_line(case: str) -> None:
    from liveplex import serve
    parser = serve.build_parser()
    args = _container(case)["args"]
    expanded = [a.replace("$(POD_IP)", "10.1.2.3").replace("$(LIVEPLEX_REDIS_URL)", "redis://r:6379")
                .replace("$(POD_NAME)", "pp-5d8f-x2x1") for a in args]
    parsed = parser.parse_args(expanded[1:])
    assert parsed.engine == spec.parse(CASES[case][0]).spec.kind and parsed.port == names.PORT
    assert parsed.max_sessions == spec.parse(CASES[case][0]).spec.capacity.max_sessions
    pacing = spec.parse(CASES[case][0]).spec.pacing
    pod_defaults = serve.build_parser().parse_args(["--engine", parsed.engine])
    assert (parsed.pace_lead_ms, parsed.pace_spread_ms) == (
        (pod_defaults.pace_lead_ms, pod_defaults.pace_spread_ms) if pacing is None
        else (pacing.lead_millis, pacing.spread_millis))
    assert parsed.subpools == spec.parse(CASES[case][0]).spec.sub_pools
    assert parsed.reattach_grace_s == spec.parse(CASES[case][0]).spec.reattach_grace_seconds
    pause = spec.parse(CASES[case][0]).spec.pause
    assert (parsed.idle_pause_s, parsed.vad_threshold, parsed.wake_reserve, parsed.max_paused,
            parsed.pause_host_budget_bytes) == (pause.idle_seconds, pause.vad_threshold_percent / 100,
                                                pause.wake_reserve, pause.max_paused, pause.host_budget_gib << 30)
    model = spec.parse(CASES[case][0]).spec.model
    if parsed.engine == "personaplex":
        assert model is not None
        assert (parsed.attention, parsed.prefill_budget_ms) == (model.attention, model.prefill_budget_millis)
        assert parsed.kv_dtype == model.kv_dtype


NOT_RESTRICTED = {"personaplex-hostpath": ["volume types"], "personaplex-image": ["volume types"]}
"""hostPath is refused by every profile but privileged; image volumes by older pod-security-admission
releases (docs/deploy.md): the only rendered pods that Pod Security "restricted" may refuse."""


@pytest.mark.parametrize("case", CASES)
def test_engine_pods_pass_the_restricted_profile_but_for_host_and_image_volumes(case: str) -> None:
    [(_, pod, meta)] = pod_security.pod_templates(_children(case)[:1])
    assert pod_security.violations(pod, meta) == NOT_RESTRICTED.get(case, [])


def test_pods_serve_tls_from_the_secret_the_operator_names() -> None:
    settings = OperatorSettings(redis_url="redis://redis.liveplex:6379/0", pod_tls_secret="engine-tls")
    le = spec.parse(objects.example("sim"))
    deployment = render.render_deployment(le, settings)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    assert args[args.index("--tls-cert") + 1] == "/etc/liveplex/tls/tls.crt"
    assert args[args.index("--tls-key") + 1] == "/etc/liveplex/tls/tls.key"
    assert {"name": "tls", "secret": {"secretName": "engine-tls"}} in pod["volumes"]
    assert {"name": "tls", "mountPath": "/etc/liveplex/tls", "readOnly": True} in container["volumeMounts"]
    assert all(p["httpGet"]["port"] == names.ADMIN_PORT_NAME for p in (  # probes stay on the plain admin port
        container["startupProbe"], container["readinessProbe"], container["livenessProbe"]))
    kubeschemas.validate_strict(deployment, kubeschemas.NEWEST)
    plain = render.render_deployment(le, REDIS)["spec"]["template"]["spec"]
    assert "--tls-cert" not in plain["containers"][0]["args"] and "tls" not in {v["name"] for v in plain["volumes"]}
