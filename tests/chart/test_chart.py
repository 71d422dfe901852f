"""The Helm chart rendered by Helm's own engine over a matrix of values: Kubernetes' schemas on every
object, Helm's lint, the generated CRD equal to `render_crd()`, the locked-down default install,
the command lines the real parsers accept, and bad values refused with their path named."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import helm_python as helm
import pytest
import yaml

from liveplex.gateway import cli as gateway_cli
from liveplex.operator import alerts, chart, cli, crd, dashboard, kube, names, signals, spec
from liveplex.operator import render as operator_render
from tests.chart import render
from tests.chart.render import NAMESPACE, by_kind, one
from tests.operator import kubeschemas

FULL = "lp-liveplex"
MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "all namespaces": {"operator": {"watch": {"allNamespaces": True}}},
    "two namespaces": {"operator": {"watch": {"namespaces": ["voice-a", "voice-b"]}}},
    "external url": {"redis": {"mode": "external", "external": {"url": "redis://:pw@127.0.0.1:6380/0"}}},
    "external secret": {"redis": {"mode": "external",
                                  "external": {"existingSecret": "my-redis", "existingSecretKey": "u"}}},
    "monitoring": {"monitoring": {"podMonitor": {"enabled": True}, "gatewayMonitor": {"enabled": True},
                                  "prometheusAdapterRules": {"enabled": True}, "alerts": {"enabled": True},
                                  "dashboard": {"enabled": True}}},
    "gateway options": {"gateway": {"autoscaling": {"enabled": True}, "apiKeys": {"existingSecret": "keys"},
                                    "pool": "voice/sim", "failClosed": True, "maxSessionsPerKey": 4,
                                    "service": {"type": "LoadBalancer", "port": 443}},
                        "imagePullSecrets": [{"name": "regcred"}], "image": {"tag": "dev"},
                        "engine": {"image": {"repository": "registry.local/liveplex-engine"},
                                   "runtimeClassName": "nvidia", "priorityClassName": "gpu-serving",
                                   "tls": {"existingSecret": "engine-tls", "serverName": "engine.voice.svc"}},
                        "helmTest": {"only": "1-12"}},
    "sample autoscaled": {"sample": {"enabled": True, "autoscaling": {"enabled": True, "provider": "keda"}}},
    "open": {"crds": {"install": False}, "networkPolicy": {"enabled": False}},
    "stored in a bucket": {"gateway": {"store": {"s3": {
        "bucket": "liveplex-calls", "endpoint": "http://minio.storage:9000", "region": "eu-west-1",
        "prefix": "calls", "credentialsSecret": "calls-bucket"}, "retentionDays": 90, "flushSeconds": 1}}},
    "turn": {"turn": {"enabled": True, "externalIp": "203.0.113.7", "serviceAnnotations": {"a": "b"},
                      "tls": {"enabled": True, "existingSecret": "turn-tls", "host": "turn.example.com"}}},
    "public tls": {"gateway": {"tls": {"existingSecret": "gateway-tls"},
                               "ingress": {"enabled": True, "className": "nginx", "host": "live.example.com",
                                           "tlsSecret": "live-example-tls"},
                               "httpRoute": {"enabled": True, "parentRefs": [{"name": "public"}],
                                             "hostnames": ["live.example.com"]}}},
}
NOT_BUILT_IN = {"LiveEngine", "PodMonitor", "HTTPRoute", "PrometheusRule"}
WARNING = 2
"""helm lint's severities: 1 info, 2 warning, 3 error."""


def _args(container: dict[str, Any]) -> list[str]:
    return [a.replace("$(POD_IP)", "10.0.0.7").replace("$(LIVEPLEX_REDIS_URL)", "redis://r:6379/0")
            for a in container["args"]]


@pytest.mark.parametrize("case", MATRIX)
def test_every_built_in_object_validates_strictly_at_the_lowest_and_newest_minor(case: str) -> None:
    objs = render.render(MATRIX[case])
    assert objs
    for obj in objs:
        if obj["kind"] not in NOT_BUILT_IN:
            for version in (kubeschemas.LOWEST, kubeschemas.NEWEST):
                kubeschemas.validate_strict(obj, version)


@pytest.mark.parametrize("case", MATRIX)
def test_helm_lint_finds_nothing(case: str) -> None:
    report = render.lint(MATRIX[case])
    findings = [m for m in report["messages"] if m["severity"] >= WARNING]
    assert report["errors"] == [] and findings == [], report
    assert {m["error"] for m in report["messages"]} <= {"icon is recommended"}  # the chart has no icon


def test_the_default_install_is_the_locked_down_platform() -> None:
    objs = render.render()
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objs)
    assert kinds == sorted([
        ("CustomResourceDefinition", "liveengines.live.liveplex.io"),
        ("ServiceAccount", f"{FULL}-operator"), ("ClusterRole", f"{FULL}-operator-voice-cluster"),
        ("ClusterRoleBinding", f"{FULL}-operator-voice-cluster"), ("Role", f"{FULL}-operator"),
        ("RoleBinding", f"{FULL}-operator"), ("Deployment", f"{FULL}-operator"),
        ("Role", f"{FULL}-operator-leader"), ("RoleBinding", f"{FULL}-operator-leader"),
        ("Deployment", f"{FULL}-gateway"), ("Service", f"{FULL}-gateway"),
        ("PodDisruptionBudget", f"{FULL}-gateway"),
        ("Secret", f"{FULL}-redis-auth"), ("Secret", f"{FULL}-redis-url"), ("Deployment", f"{FULL}-redis"),
        ("Secret", f"{FULL}-pod-token"),
        ("Service", f"{FULL}-redis"),
        ("NetworkPolicy", f"{FULL}-engines"), ("NetworkPolicy", f"{FULL}-redis"),
        ("Pod", f"{FULL}-check"),  # the `helm test` hook: created only by `helm test`
    ])
    assert all(o["metadata"].get("namespace") in (NAMESPACE, None) for o in objs)


def test_the_templated_crd_equals_render_crd_and_is_kept_on_uninstall() -> None:
    [rendered] = by_kind(render.render(), "CustomResourceDefinition")
    assert rendered["metadata"].pop("annotations") == chart.KEEP
    assert rendered == crd.render_crd()
    assert not by_kind(render.render({"crds": {"install": False}}), "CustomResourceDefinition")


def test_the_generated_templates_are_in_sync_with_their_python_owners() -> None:
    for relative, generate in chart.FILES.items():
        assert (render.CHART / relative).read_text() == generate(), (
            f"charts/liveplex/{relative} is stale: run scripts/chart_generate.py")


def test_the_operator_runs_two_replicas_electing_a_leader_the_real_parser_accepts() -> None:
    dep = one(render.render(), "Deployment", f"{FULL}-operator")
    assert dep["spec"]["replicas"] == 2 and "strategy" not in dep["spec"]  # rolling: the standby takes over
    container = dep["spec"]["template"]["spec"]["containers"][0]
    args = _args(container)
    assert args[:2] == ["operator", "run"]
    s = cli.settings_from_args(cli.build_parser().parse_args(args[1:]))
    assert s.namespaces == (NAMESPACE,) and s.redis_secret is not None
    assert (s.redis_secret.name, s.redis_secret.key) == (f"{FULL}-redis-url", "url")
    assert s.leader_lease == (NAMESPACE, f"{FULL}-operator") and s.lease_duration_s == 15
    assert s.liveness_endpoint == "http://10.0.0.7:8080/healthz"  # kopf's, leader only; the probe asks ours
    assert s.metrics_host == "10.0.0.7"  # the pod's IP: replicas sharing a host (the emulator) do not collide
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["ports"] == [{"name": "metrics", "containerPort": s.metrics_port, "protocol": "TCP"}]
    assert (s.image_repository, s.image_tag) == ("ghcr.io/liveplex/liveplex", "0.1.0")
    wide = one(render.render(MATRIX["all namespaces"]), "Deployment", f"{FULL}-operator")
    assert cli.settings_from_args(cli.build_parser().parse_args(
        _args(wide["spec"]["template"]["spec"]["containers"][0])[1:])).clusterwide


def test_engine_pod_defaults_reach_the_operator() -> None:
    def settings(case: str) -> Any:
        dep = one(render.render(MATRIX[case]), "Deployment", f"{FULL}-operator")
        return cli.settings_from_args(cli.build_parser().parse_args(_args(dep["spec"]["template"]["spec"]
                                                                          ["containers"][0])[1:]))
    s = settings("gateway options")
    assert (s.engine_image_repository, s.image_tag) == ("registry.local/liveplex-engine", "dev")
    assert (s.pod_defaults.runtime_class_name, s.pod_defaults.priority_class_name,
            s.pod_defaults.image_pull_secrets) == ("nvidia", "gpu-serving", ("regcred",))
    d = settings("defaults")
    assert d.engine_image_repository == "ghcr.io/liveplex/liveplex-engine" and d.pod_defaults == type(d.pod_defaults)()


def test_helm_test_runs_the_checklist_against_the_gateway_service() -> None:
    def pod(case: str) -> dict[str, Any]:
        return one(render.render(MATRIX[case]), "Pod", f"{FULL}-check")
    check = pod("defaults")
    assert check["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert check["spec"]["restartPolicy"] == "Never"
    [container] = check["spec"]["containers"]
    assert container["args"] == ["check", f"--base-url=http://{FULL}-gateway.{NAMESPACE}.svc:80/v1"]
    from liveplex.conformance import cli as check_cli  # the real parser takes the rendered line
    options, only, _ = check_cli.parse_args(pod("gateway options")["spec"]["containers"][0]["args"][1:])
    assert (options.base_url, only) == (f"http://{FULL}-gateway.{NAMESPACE}.svc:443/v1", "1-12")


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


@pytest.mark.parametrize("case", ["defaults", "two namespaces", "all namespaces"])
def test_rbac_grants_every_kind_the_operator_touches_in_each_watched_namespace(case: str) -> None:
    objs = render.render(MATRIX[case])
    needed = {(api.rpartition("/")[0], plural, verb) for (api, _), plural in kube.PLURALS.items()
              for verb in ("get", "list", "watch", "patch") if plural != "leases"} - {("", "pods", "get")}
    [leader] = [r for r in by_kind(objs, "Role") if r["metadata"]["name"].endswith("-leader")]
    assert leader["metadata"]["namespace"] == NAMESPACE and leader["rules"] == [  # its one Lease, nothing more
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [f"{FULL}-operator"],
         "verbs": ["get", "patch"]}]
    if case == "all namespaces":
        [role] = by_kind(objs, "ClusterRole")
        assert by_kind(objs, "Role") == [leader] and ("", "namespaces", "watch") in _rules(role)
        roles = [role]
    else:
        roles = [r for r in by_kind(objs, "Role") if r is not leader]
        watched = MATRIX[case].get("operator", {}).get("watch", {}).get("namespaces") or [NAMESPACE]
        assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(watched)
        [cluster] = by_kind(objs, "ClusterRole")
        assert _rules(cluster) == {(g, r, v) for g, r in (("apiextensions.k8s.io", "customresourcedefinitions"),
                                                          ("", "namespaces")) for v in ("list", "watch")}
    for role in roles:
        assert needed <= _rules(role), needed - _rules(role)
        assert not any(r == "secrets" for _, r, _ in _rules(role)), "the operator never reads Secrets"


def test_the_gateway_rolls_without_unavailability_and_drains_before_it_stops() -> None:
    objs = render.render()
    dep = one(objs, "Deployment", f"{FULL}-gateway")
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["lifecycle"]["preStop"]["httpGet"] == {"path": "/drain?deadline_s=600", "port": "admin"}
    assert pod["terminationGracePeriodSeconds"] == 630
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    parsed = gateway_cli.build_parser().parse_args(_args(container)[1:])
    assert (parsed.host, parsed.port, parsed.drain_deadline_s, parsed.pool) == ("10.0.0.7", 8080, 600.0, None)
    assert one(objs, "PodDisruptionBudget", f"{FULL}-gateway")["spec"]["maxUnavailable"] == 1
    optioned = one(render.render(MATRIX["gateway options"]), "Deployment", f"{FULL}-gateway")
    args = gateway_cli.build_parser().parse_args(_args(optioned["spec"]["template"]["spec"]["containers"][0])[1:])
    assert (args.pool, args.fail_closed, args.max_sessions_per_key) == ("voice/sim", True, 4)
    assert str(args.api_key_file) == "/etc/liveplex/api-keys/keys" and "replicas" not in optioned["spec"]


def test_only_gateways_reach_engine_pods_and_only_liveplex_pods_reach_redis() -> None:
    objs = render.render(MATRIX["two namespaces"])
    engines = [o for o in by_kind(objs, "NetworkPolicy") if o["metadata"]["name"].endswith("-engines")]
    assert sorted(p["metadata"]["namespace"] for p in engines) == ["voice-a", "voice-b"]
    for policy in engines:
        assert policy["spec"]["podSelector"] == {"matchLabels": {names.NAME_LABEL: names.APP}}
        [rule] = policy["spec"]["ingress"]
        assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}},
                                 "podSelector": {"matchLabels": {"app.kubernetes.io/name": "liveplex-gateway",
                                                                 "app.kubernetes.io/instance": "lp"}}}]
        assert rule["ports"] == [{"port": names.PORT_NAME, "protocol": "TCP"}]
    redis = one(objs, "NetworkPolicy", f"{FULL}-redis")
    sources = redis["spec"]["ingress"][0]["from"]
    assert [s["podSelector"]["matchLabels"].get("app.kubernetes.io/name") for s in sources] == [
        "liveplex-gateway", "liveplex-operator", names.APP, names.APP]
    monitored = render.render(MATRIX["monitoring"])
    assert len(one(monitored, "NetworkPolicy", f"{FULL}-engines")["spec"]["ingress"]) == 2
    assert not by_kind(render.render(MATRIX["open"]), "NetworkPolicy")


def test_an_explicit_redis_url_reaches_every_component_through_one_secret() -> None:
    objs = render.render(MATRIX["external url"])
    assert not [o for o in objs if o["metadata"]["name"].endswith("-redis")]
    secret = one(objs, "Secret", f"{FULL}-redis-url")
    assert base64.b64decode(secret["data"]["url"]).decode() == "redis://:pw@127.0.0.1:6380/0"
    for dep in by_kind(objs, "Deployment"):
        env_vars = dep["spec"]["template"]["spec"]["containers"][0]["env"]
        [env] = [e for e in env_vars if e["name"] == "LIVEPLEX_REDIS_URL"]
        assert env["valueFrom"]["secretKeyRef"] == {"name": f"{FULL}-redis-url", "key": "url"}
    mine = render.render(MATRIX["external secret"])
    assert [s["metadata"]["name"] for s in by_kind(mine, "Secret")] == [f"{FULL}-pod-token"]  # no Redis one
    dep = one(mine, "Deployment", f"{FULL}-operator")
    assert "--redis-secret=my-redis:u" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_gateway_serves_tls_from_a_secret_behind_an_ingress_and_a_route_that_never_time_out() -> None:
    objs = render.render(MATRIX["public tls"])
    pod = one(objs, "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]
    args = gateway_cli.build_parser().parse_args(_args(pod["containers"][0])[1:])
    assert (str(args.tls_cert), str(args.tls_key)) == ("/etc/liveplex/tls/tls.crt", "/etc/liveplex/tls/tls.key")
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tls"]
    assert mount["mountPath"] == "/etc/liveplex/tls" and mount["readOnly"]
    assert {"name": "tls", "secret": {"secretName": "gateway-tls"}} in pod["volumes"]
    assert one(objs, "Service", f"{FULL}-gateway")["spec"]["ports"][0]["appProtocol"] == "https"
    ingress = one(objs, "Ingress", f"{FULL}-gateway")
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "3600"
    assert ingress["spec"]["tls"] == [{"secretName": "live-example-tls", "hosts": ["live.example.com"]}]
    route = one(objs, "HTTPRoute", f"{FULL}-gateway")
    assert route["spec"]["rules"][0]["timeouts"] == {"request": "0s"}
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": f"{FULL}-gateway", "port": 80}]
    with pytest.raises(Exception, match="parentRefs"):
        render.render({"gateway": {"httpRoute": {"enabled": True}}})


def test_stored_calls_reach_the_gateways_as_a_shared_claim_or_a_bucket_with_credentials_from_a_secret() -> None:
    """docs/storage.md: a ReadWriteMany claim mounted by every replica (the directory store), or a
    bucket whose credentials come from a Secret as environment, never an argument; none: no store
    flag, and the gateways refuse `store: true`."""
    def gateway(values: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        pod = one(render.render(values), "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]
        args = gateway_cli.build_parser().parse_args(_args(pod["containers"][0])[1:])
        return pod, args

    pod, args = gateway({"gateway": {"store": {"claimName": "stored-calls", "retentionDays": 7}}})
    assert (str(args.store_dir), args.store_retention_days, args.store_flush_s) == ("/var/lib/liveplex/stored", 7, 2)
    [mount] = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "stored"]
    assert mount["mountPath"] == "/var/lib/liveplex/stored" and not mount.get("readOnly")
    assert {"name": "stored", "persistentVolumeClaim": {"claimName": "stored-calls"}} in pod["volumes"]
    pod, args = gateway(MATRIX["stored in a bucket"])
    assert (args.store_dir, args.store_s3_bucket, args.store_s3_endpoint, args.store_s3_region,
            args.store_s3_prefix, args.store_retention_days, args.store_flush_s) == (
        None, "liveplex-calls", "http://minio.storage:9000", "eu-west-1", "calls", 90, 1.0)
    assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "calls-bucket"}}]
    _, args = gateway({})
    assert (args.store_dir, args.store_s3_bucket) == (None, None)


SECRET_ENV = ("LIVEPLEX_REDIS_URL", "LIVEPLEX_POD_KEY", "LIVEPLEX_API_KEYS")


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_no_secret_reaches_a_command_line(case: str) -> None:
    """Whatever a container's args say is in every process list and pod spec: the Redis URL (with
    its password) and the tokens reach the gateway, the operator and the engines only as env."""
    objs = render.render(MATRIX[case])
    templates = [o["spec"]["template"]["spec"] for o in by_kind(objs, "Deployment")]
    operator = one(objs, "Deployment", f"{FULL}-operator")["spec"]["template"]["spec"]["containers"][0]
    opts = cli.settings_from_args(cli.build_parser().parse_args(_args(operator)[1:]))
    for le in by_kind(objs, "LiveEngine"):
        templates.append(operator_render.render_deployment(spec.parse(le), opts)["spec"]["template"]["spec"])
    for pod in templates:
        for container in pod.get("initContainers", []) + pod["containers"]:
            line = " ".join(container.get("command", []) + container.get("args", []))
            assert not any(f"$({env})" in line for env in SECRET_ENV) and "redis://" not in line, line


def test_engines_take_sessions_only_with_the_pod_token_that_only_the_gateways_have() -> None:
    """One generated token, in the release namespace (the gateways) and every watched one (the
    engines): the operator renders it into the engines' accepted keys, the gateways present it."""
    objs = render.render(MATRIX["two namespaces"])
    tokens = [s for s in by_kind(objs, "Secret") if s["metadata"]["name"] == f"{FULL}-pod-token"]
    assert {s["metadata"]["namespace"] for s in tokens} == {NAMESPACE, "voice-a", "voice-b"}
    assert len({s["data"]["token"] for s in tokens}) == 1 and len(base64.b64decode(tokens[0]["data"]["token"])) == 48
    gateway = one(objs, "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]["containers"][0]
    [env] = [e for e in gateway["env"] if e["name"] == "LIVEPLEX_POD_KEY"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": f"{FULL}-pod-token", "key": "token"}
    operator = one(objs, "Deployment", f"{FULL}-operator")["spec"]["template"]["spec"]["containers"][0]
    assert f"--pod-token-secret={FULL}-pod-token:token" in operator["args"]
    assert not [a for a in gateway["args"] + operator["args"] if "token" in a.lower() and "secret" not in a]


def test_the_url_secret_is_in_every_watched_namespace_for_the_engine_pods() -> None:
    secrets = [o for o in render.render(MATRIX["two namespaces"]) if o["metadata"]["name"] == f"{FULL}-redis-url"]
    assert sorted(s["metadata"]["namespace"] for s in secrets) == ["voice", "voice-a", "voice-b"]
    assert len({s["data"]["url"] for s in secrets}) == 1


def test_monitors_label_engine_series_with_the_liveengine_the_queries_select() -> None:
    objs = render.render(MATRIX["monitoring"])
    pm = next(m for m in by_kind(objs, "PodMonitor") if m["metadata"]["name"].endswith("-engines"))
    [endpoint] = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "admin"
    # Prometheus' `replace` relabelling (the default action, regex (.*)) on an engine pod's meta labels
    meta = {"__meta_kubernetes_namespace": "voice", "__meta_kubernetes_pod_label_app_kubernetes_io_instance": "pp"}
    labels = {r["targetLabel"]: r.get("separator", ";").join(meta[source] for source in r["sourceLabels"])
              for r in endpoint["relabelings"]}
    assert labels == {signals.LIVEENGINE_LABEL: names.pool("voice", "pp"), signals.SELECTOR_LABEL: "pp"}
    assert f'{signals.LIVEENGINE_LABEL}="voice/pp"' == signals.Target("voice", "pp").engine
    assert pm["spec"]["selector"] == {"matchLabels": {names.NAME_LABEL: names.APP}}
    gateway_monitor = next(m for m in by_kind(objs, "PodMonitor") if m["metadata"]["name"].endswith("-gateway"))
    assert gateway_monitor["spec"]["podMetricsEndpoints"][0] == {"port": "admin", "path": "/metrics", "interval": "15s"}
    assert one(objs, "PrometheusRule", f"{FULL}-alerts")["spec"] == alerts.rule_file()
    board = one(objs, "ConfigMap", f"{FULL}-dashboard")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["liveplex-pool.json"]) == dashboard.dashboard()
    config = one(objs, "ConfigMap", f"{FULL}-adapter-rules")
    assert yaml.safe_load(config["data"]["config.yaml"]) == signals.adapter_rules()


def test_the_sample_is_a_valid_sim_liveengine_that_leaves_replicas_to_its_autoscaler() -> None:
    [sample] = by_kind(render.render(MATRIX["sample autoscaled"]), "LiveEngine")
    le = spec.parse(sample)
    assert le.spec.kind == "sim" and le.spec.autoscaling is not None and le.spec.autoscaling.provider == "keda"
    assert "replicas" not in sample["spec"]
    [plain] = by_kind(render.render({"sample": {"enabled": True}}), "LiveEngine")
    assert spec.parse(plain).spec.replicas == 1


def test_the_notes_name_the_endpoint() -> None:
    assert f"ws://{FULL}-gateway.{NAMESPACE}.svc:80/v1/live/sessions" in render.notes()


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "typo": ({"gateway": {"replcas": 3}}, "/gateway"),
    "zero gateways": ({"gateway": {"replicas": 0}}, "/gateway/replicas"),
    "bad pull policy": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    "namespace": ({"operator": {"watch": {"namespaces": ["Voice_A"]}}}, "/operator/watch/namespaces/0"),
    "external without url": ({"redis": {"mode": "external"}}, "/redis/external"),
    "redis mode": ({"redis": {"mode": "cluster"}}, "/redis/mode"),
    "url scheme": ({"redis": {"mode": "external", "external": {"url": "http://redis:6379"}}}, "/redis/external/url"),
    "pool": ({"gateway": {"pool": "sim"}}, "/gateway/pool"),
    "quantity": ({"gateway": {"resources": {"requests": {"cpu": "lots"}}}}, "/gateway/resources/requests/cpu"),
    "log level": ({"operator": {"logLevel": "trace"}}, "/operator/logLevel"),
    "string for a bool": ({"crds": {"install": "yes"}}, "/crds/install"),
    "sample name": ({"sample": {"enabled": True, "name": "Sim"}}, "/sample/name"),
    "runtime class": ({"engine": {"runtimeClassName": "NVIDIA"}}, "/engine/runtimeClassName"),
    "two stores": ({"gateway": {"store": {"claimName": "calls", "s3": {"bucket": "calls"}}}}, "/gateway/store"),
    "store endpoint": ({"gateway": {"store": {"s3": {"bucket": "calls", "endpoint": "minio:9000"}}}},
                       "/gateway/store/s3/endpoint"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_values_are_refused_with_the_path_named(case: str) -> None:
    values, where = BAD[case]
    with pytest.raises(helm.HelmValuesError, match=f"at '{where}'"):
        render.validate(copy.deepcopy(values))
    with pytest.raises(helm.HelmValuesError, match=f"at '{where}'"):
        render.render(values)


@pytest.mark.parametrize("case", MATRIX)
def test_every_value_set_of_the_matrix_passes_the_schema(case: str) -> None:
    render.validate(copy.deepcopy(MATRIX[case]))


def test_a_redis_cluster_url_passes_the_schema() -> None:
    for scheme in ("redis+cluster", "rediss+cluster"):  # placement.url.CLUSTER_SCHEMES: sub-pools need one
        render.validate({"redis": {"mode": "external", "external": {"url": f"{scheme}://:pw@10.0.0.1:6379"}}})


def test_the_operator_monitor_scrapes_every_replica_on_its_metrics_port() -> None:
    objs = render.render({"monitoring": {"operatorMonitor": {"enabled": True, "labels": {"release": "kps"}}}})
    monitor = one(objs, "PodMonitor", f"{FULL}-operator")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]
    template = one(objs, "Deployment", f"{FULL}-operator")["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert "metrics" in {p["name"] for p in template["spec"]["containers"][0]["ports"]}
    assert not [o for o in render.render() if o["kind"] == "PodMonitor"]


def test_a_rediss_ca_reaches_every_redis_client_from_the_url_secret() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    objs = render.render({"redis": {"mode": "external", "external": {"url": "rediss://u:pw@redis:6380/0", "ca": pem}}})
    secret = one(objs, "Secret", f"{FULL}-redis-url")
    assert base64.b64decode(secret["data"]["ca"]).decode() == pem
    for name in ("gateway", "operator"):
        env = one(objs, "Deployment", f"{FULL}-{name}")["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "LIVEPLEX_REDIS_CA", "valueFrom": {"secretKeyRef": {
            "name": f"{FULL}-redis-url", "key": "ca", "optional": True}}} in env, name
    assert "ca" not in one(render.render(), "Secret", f"{FULL}-redis-url")["data"]


def test_engine_tls_reaches_the_engines_through_the_operator_and_the_gateways_trust_its_ca() -> None:
    objs = render.render({"engine": {"tls": {"existingSecret": "engine-tls", "serverName": "engine.voice.svc"}}})
    operator = one(objs, "Deployment", f"{FULL}-operator")["spec"]["template"]["spec"]["containers"][0]
    opts = cli.settings_from_args(cli.build_parser().parse_args(_args(operator)[1:]))
    assert opts.pod_tls_secret == "engine-tls"
    gateway = one(objs, "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]
    args = gateway["containers"][0]["args"]
    assert "--upstream-ca=/etc/liveplex/engine-tls/ca.crt" in args
    assert "--upstream-server-name=engine.voice.svc" in args
    assert {"name": "engine-tls", "mountPath": "/etc/liveplex/engine-tls", "readOnly": True} in \
        gateway["containers"][0]["volumeMounts"]
    assert {"name": "engine-tls", "secret": {"secretName": "engine-tls", "items": [
        {"key": "ca.crt", "path": "ca.crt"}]}} in gateway["volumes"]
    with pytest.raises(Exception, match="engine.tls.serverName is required"):
        render.render({"engine": {"tls": {"existingSecret": "engine-tls"}}})
    plain = one(render.render(), "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]["containers"][0]
    assert not [a for a in plain["args"] if a.startswith("--upstream-")]


def test_turn_gives_webrtc_calls_one_udp_service_and_the_gateways_relayed_candidates() -> None:
    """docs/webrtc.md: coturn behind a LoadBalancer (its port on UDP and TCP, one UDP port per
    relay port), its shared secret generated into a Secret that reaches coturn as a config file
    (`use-auth-secret`) and the gateways as a file, never a command line; the gateways' ICE flags
    are the ones `serve` takes, and callers are handed its outside URLs."""
    assert not [o for o in render.render() if "-turn" in o["metadata"]["name"]]
    with pytest.raises(Exception, match="turn.externalIp"):
        render.render({"turn": {"enabled": True}})
    objs = render.render({"turn": {"enabled": True, "externalIp": "203.0.113.7", "relayPortMax": 49163}})
    service = one(objs, "Service", f"{FULL}-turn")
    assert service["spec"]["type"] == "LoadBalancer"
    assert [(p["port"], p["protocol"]) for p in service["spec"]["ports"]] == [
        (3478, "UDP"), (3478, "TCP"), *((port, "UDP") for port in range(49160, 49164))]
    turn = one(objs, "Deployment", f"{FULL}-turn")["spec"]["template"]["spec"]
    args = turn["containers"][0]["args"]
    assert "--external-ip=203.0.113.7/$(POD_IP)" in args and "--use-auth-secret" in args and "--no-tls" in args
    secret = one(objs, "Secret", f"{FULL}-turn-auth")
    shared = base64.b64decode(secret["data"]["secret"]).decode()
    assert base64.b64decode(secret["data"]["turnserver.conf"]).decode() == f"static-auth-secret={shared}\n"
    assert not [a for a in args if shared in a]
    gateway = one(objs, "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]
    parsed = gateway_cli.build_parser().parse_args(_args(gateway["containers"][0])[1:])
    assert parsed.webrtc_relay_only and parsed.webrtc_ice_server == [
        f"turn:{FULL}-turn.{NAMESPACE}.svc:3478?transport=udp"]
    assert (str(parsed.webrtc_ice_secret_file), parsed.webrtc_ice_ttl_s) == ("/etc/liveplex/turn/secret", 86400)
    assert parsed.webrtc_caller_ice_server == [
        "stun:203.0.113.7:3478", "turn:203.0.113.7:3478?transport=udp", "turn:203.0.113.7:3478?transport=tcp"]
    [volume] = [v for v in gateway["volumes"] if v["name"] == "turn"]
    assert volume["secret"] == {"secretName": f"{FULL}-turn-auth", "items": [{"key": "secret", "path": "secret"}]}
    assert parsed.peer_url == "ws://10.0.0.7:8080"  # a sideband reaching another replica is relayed here
    tls = one(render.render(MATRIX["public tls"]), "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]
    assert gateway_cli.build_parser().parse_args(_args(tls["containers"][0])[1:]).peer_url is None
    for peer_ca, ca in ((False, None), (True, "/etc/liveplex/tls/ca.crt")):  # a name the certificate carries
        values = {"existingSecret": "gateway-tls", "serverName": "live.example.com", "peerCa": peer_ca}
        named = one(render.render({"gateway": {"tls": values}}), "Deployment", f"{FULL}-gateway")
        parsed = gateway_cli.build_parser().parse_args(_args(named["spec"]["template"]["spec"]["containers"][0])[1:])
        assert (parsed.peer_url, parsed.peer_server_name) == ("wss://10.0.0.7:8080", "live.example.com")
        assert (None if parsed.peer_ca is None else str(parsed.peer_ca)) == ca


def test_turn_over_tls_on_443_with_a_certificate_from_a_secret() -> None:
    """The fallback for networks that block UDP: coturn's TLS listener (unprivileged 5349 in its
    pod) behind the Service's 443, its certificate from a kubernetes.io/tls Secret, and callers
    handed a `turns:` URL for the name that certificate carries (what the gateway's own flag
    parser takes: tests/gptlive/test_webrtc.py runs that setup against a real coturn)."""
    with pytest.raises(Exception, match="turn.tls.existingSecret"):
        render.render({"turn": {"enabled": True, "externalIp": "203.0.113.7", "tls": {"enabled": True}}})
    with pytest.raises(Exception, match="turn.tls.host"):
        render.render({"turn": {"enabled": True, "externalIp": "203.0.113.7",
                                "tls": {"enabled": True, "existingSecret": "turn-tls"}}})
    objs = render.render(MATRIX["turn"])
    service = one(objs, "Service", f"{FULL}-turn")
    assert {"name": "turn-tls", "port": 443, "targetPort": "turn-tls", "protocol": "TCP"} in service["spec"]["ports"]
    turn = one(objs, "Deployment", f"{FULL}-turn")["spec"]["template"]["spec"]
    container = turn["containers"][0]
    assert {"--tls-listening-port=5349", "--cert=/etc/coturn/tls/tls.crt", "--pkey=/etc/coturn/tls/tls.key"} <= set(
        container["args"]) and "--no-tls" not in container["args"]
    assert {"name": "turn-tls", "containerPort": 5349, "protocol": "TCP"} in container["ports"]
    assert {"name": "tls", "mountPath": "/etc/coturn/tls", "readOnly": True} in container["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": "turn-tls", "items": [
        {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}} in turn["volumes"]
    gateway = one(objs, "Deployment", f"{FULL}-gateway")["spec"]["template"]["spec"]
    parsed = gateway_cli.build_parser().parse_args(_args(gateway["containers"][0])[1:])
    assert parsed.webrtc_caller_ice_server[-1] == "turns:turn.example.com:443?transport=tcp"
