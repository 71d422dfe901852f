"""The Go validation rules and the schema decoder as pure functions (the HTTP contract is test_admission.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from liveplex.emulator.apiserver import disruption, errors, openapi, quantity, validation


@pytest.mark.parametrize(("key", "ok"), [
    ("app", True), ("app.kubernetes.io/name", True), ("a/b/c", False), ("/x", False), ("Example.com/x", False),
    ("x" * 63, True), ("x" * 64, False), ("-x", False), ("my_key.v1", True)])
def test_qualified_names(key: str, ok: bool) -> None:
    assert (validation.qualified_name(key) == []) == ok


@pytest.mark.parametrize(("value", "ok"), [("", True), ("v1.2_x", True), ("has space", False), ("-x", False),
                                           ("x" * 63, True), ("x" * 64, False)])
def test_label_values(value: str, ok: bool) -> None:
    assert (validation.label_value(value) == []) == ok


@pytest.mark.parametrize(("name", "ok"), [("http", True), ("h2c-web", True), ("8000", False), ("a--b", False),
                                          ("Http", False), ("very-long-port-name", False), ("-x", False)])
def test_port_names(name: str, ok: bool) -> None:
    assert (validation.port_name(name) == []) == ok


@pytest.mark.parametrize(("text", "value"), [("500m", Decimal("0.5")), ("1Gi", Decimal(2**30)), ("1e3", Decimal(1000)),
                                             ("2", Decimal(2)), (".5", Decimal("0.5")), (3, Decimal(3)),
                                             ("1Gb", None), ("abc", None), ("", None), (True, None)])
def test_quantities(text: object, value: Decimal | None) -> None:
    assert quantity.parse(text) == value


@pytest.mark.parametrize(("toleration", "fields"), [
    ({"key": "gpu", "operator": "Exists"}, []),
    ({"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}, []),
    ({"operator": "Exists"}, []),
    ({"key": "gpu", "operator": "Exists", "value": "x"}, ["t.operator"]),
    ({"key": "gpu", "operator": "In"}, ["t.operator"]),
    ({"operator": "Equal", "value": "x"}, ["t.operator"]),
    ({"key": "gpu", "value": "not valid!"}, ["t.value"]),
    ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}, ["t.effect"]),
    ({"key": "gpu", "operator": "Exists", "effect": "Never"}, ["t.effect"]),
])
def test_tolerations(toleration: dict, fields: list[str]) -> None:
    assert [c.field for c in validation.toleration("t", toleration)] == fields


def test_every_cause_of_a_bad_pod_spec_is_reported_with_its_path() -> None:
    spec = {"containers": [
        {"name": "a", "image": "i", "volumeMounts": [{"name": "missing", "mountPath": "/m"}],
         "readinessProbe": {"periodSeconds": 1}, "livenessProbe": {"exec": {"command": ["x"]}, "successThreshold": 2},
         "env": [{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]},
        {"name": "a", "image": "i", "imagePullPolicy": "Sometimes"}],
        "volumes": [{"name": "v"}], "restartPolicy": "Sometimes"}
    fields = [c.field for c in validation.pod_spec("spec", spec)]
    assert fields == ["spec.volumes[0]", "spec.containers[0].env[0].valueFrom",
                      "spec.containers[0].readinessProbe", "spec.containers[0].livenessProbe.successThreshold",
                      "spec.containers[0].volumeMounts[0].name", "spec.containers[1].name",
                      "spec.containers[1].imagePullPolicy", "spec.restartPolicy"]


def test_a_workload_template_must_restart_always_and_match_its_selector() -> None:
    spec = {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                         "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}
    assert [c.field for c in validation.workload("apps/deployments", spec)] == [
        "spec.template.metadata.labels", "spec.template.spec.restartPolicy",
        "spec.strategy.rollingUpdate.maxUnavailable"]


def test_updates_keep_immutable_fields() -> None:
    pod = {"spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"operator": "Exists"}]}}
    image = {"spec": {"containers": [{"name": "c", "image": "j"}], "tolerations": [{"operator": "Exists"}],
                      "nodeName": "n"}}
    assert validation.check_update("/pods", pod, image) == []
    dropped = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert [c.field for c in validation.check_update("/pods", pod, dropped)] == ["spec.tolerations"]
    assert validation.check_update("apps/deployments", {"spec": {"selector": {"matchLabels": {"a": "1"}}}},
                                   {"spec": {"selector": {"matchLabels": {"a": "2"}}}})[0].field == "spec.selector"


def test_the_decoder_drops_unknown_fields_and_names_wrong_types() -> None:
    definition = openapi.root("apps", "v1", "Deployment")
    assert definition == "io.k8s.api.apps.v1.Deployment"
    decoded = openapi.decode({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {
        "replicas": 1, "bogus": 1, "template": {"spec": {"containers": [{"name": "c", "extra": True}]}}}}, definition)
    assert decoded.unknown == ["spec.bogus", "spec.template.spec.containers[0].extra"]
    assert "bogus" not in decoded.obj["spec"] and decoded.mistyped == []
    wrong = openapi.decode({"spec": {"replicas": True, "template": {"metadata": {"labels": {"a": 1}}}}}, definition)
    assert wrong.mistyped == [
        "json: cannot unmarshal bool into Go struct field DeploymentSpec.spec.replicas of type int32",
        "json: cannot unmarshal number into Go struct field ObjectMeta.spec.template.metadata.labels[a] of type string"]


def test_a_budget_expects_its_controllers_scale_and_counts_ready_pods() -> None:
    def pod(name: str, ready: bool, owner: str | None = "rs") -> dict:
        refs = [{"uid": owner, "controller": True}] if owner else []
        return {"metadata": {"name": name, "labels": {"app": "pp"}, "ownerReferences": refs},
                "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}

    pdb = {"metadata": {"name": "pp"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "pp"}}}}
    pods = [pod("a", True), pod("b", True)]
    assert disruption.budget(pdb, pods, {"rs": 3}) == disruption.Budget("pp", 2, 2, 3)
    disruption.check(pods[0], [pdb], pods, {"rs": 2})  # 2 healthy, 1 needed: may go
    with pytest.raises(errors.ApiError) as refused:
        disruption.check(pods[0], [pdb], pods, {"rs": 3})  # a third pod is missing already
    assert refused.value.code == 429
    disruption.check(pod("c", False), [pdb], [*pods, pod("c", False)], {"rs": 3})  # unready, budget met


def test_affinity_terms() -> None:
    good = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                   "labelSelector": {"matchLabels": {"app": "pp"}}}}]}}
    assert validation.affinity("a", good) == []
    bad = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In"}, {"key": "x", "operator": "Near"},
                              {"key": "y", "operator": "Gt", "values": ["a"]}]}]}},
           "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]},
           "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
               {"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}]}}
    terms = "a.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions"
    assert [c.field for c in validation.affinity("a", bad)] == [
        f"{terms}[0].values", f"{terms}[1].operator", f"{terms}[2].values",
        "a.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        "a.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"]


def test_security_contexts() -> None:
    hardened = {"runAsNonRoot": True, "runAsUser": 10001, "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"}}
    assert validation.security_context("c", hardened) == []
    bad = {"runAsUser": -1, "privileged": True, "allowPrivilegeEscalation": False,
           "seccompProfile": {"type": "Localhost"}, "appArmorProfile": {"type": "RuntimeDefault",
                                                                        "localhostProfile": "x"}}
    assert [c.field for c in validation.security_context("c", bad)] == [
        "c.runAsUser", "c.seccompProfile.localhostProfile", "c.appArmorProfile.localhostProfile", "c"]
