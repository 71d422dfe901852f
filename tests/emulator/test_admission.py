"""Contract: built-in objects a real kube-apiserver (v1.32) refuses are refused, with its code and causes.

Written against the official client and asserting only upstream's behaviour, so the opt-in suite
runs these same tests on a real cluster (`tests/e2e_cluster/`).
"""

from __future__ import annotations

import copy

import kubernetes
import pytest

from .contract import REAL_CLUSTER, Kube, causes, contract_emulator, kube, refusal  # noqa: F401 (fixtures)

IMAGE = "ghcr.io/example/liveplex:0.1.0"


def deployment(name: str = "web", **pod: object) -> dict:
    spec = {"containers": [{"name": "web", "image": IMAGE, "ports": [{"name": "http", "containerPort": 8000}]}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {**spec, **pod}}}}


def _refused(call: object, *args: object, **kwargs: object) -> dict:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return refusal(caught)


def test_the_issue_example_invalid_pod_labels_annotations_tolerations_node_selector_is_422(kube: Kube) -> None:
    body = deployment()
    template = body["spec"]["template"]
    template["metadata"]["labels"]["bad label"] = "x"
    template["metadata"]["annotations"] = {"-not-a-key-": "v"}
    template["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "value": "yes"}]
    template["spec"]["nodeSelector"] = {"pool": "not a value!"}
    status = _refused(kube.apps.create_namespaced_deployment, kube.namespace, body)
    assert (status["code"], status["reason"]) == (422, "Invalid")
    found = causes(status)
    assert "spec.template.metadata.labels" in found
    assert "spec.template.metadata.annotations" in found
    assert found["spec.template.spec.tolerations[0].operator"] == [
        "Invalid value: \"yes\": value must be empty when `operator` is 'Exists'"]
    assert any("a valid label must be an empty string" in m for m in found["spec.template.spec.nodeSelector"])
    assert status["message"].startswith('Deployment.apps "web" is invalid: [')
    assert status["details"]["kind"] == "Deployment" and status["details"]["group"] == "apps"


def test_a_container_port_above_65535_is_refused_at_admission(kube: Kube) -> None:
    body = deployment()
    body["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 70000
    found = causes(_refused(kube.apps.create_namespaced_deployment, kube.namespace, body))
    assert found == {"spec.template.spec.containers[0].ports[0].containerPort": [
        "Invalid value: 70000: must be between 1 and 65535, inclusive"]}


@pytest.mark.parametrize(("resources", "field", "words"), [
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, "requests[cpu]", "must be less than or equal to cpu limit"),
    ({"limits": {"nvidia.com/gpu": "0.5"}}, "limits[nvidia.com/gpu]", "must be an integer"),
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}, "requests[nvidia.com/gpu]",
     "must be equal to nvidia.com/gpu limit"),
    ({"limits": {"gpu": "1"}}, "limits[gpu]", "must be a standard resource type or fully qualified"),
])
def test_resource_quantities_are_checked_like_upstream(kube: Kube, resources: dict, field: str, words: str) -> None:
    body = deployment()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = resources
    found = causes(_refused(kube.apps.create_namespaced_deployment, kube.namespace, body))
    assert any(words in m for m in found[f"spec.template.spec.containers[0].resources.{field}"]), found


def test_a_malformed_quantity_or_a_wrong_json_type_is_a_400_from_the_decoder(kube: Kube) -> None:
    body = deployment()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "1Gb"}}
    status = _refused(kube.apps.create_namespaced_deployment, kube.namespace, body)
    assert (status["code"], status["reason"]) == (400, "BadRequest")
    assert "quantities must match the regular expression" in status["message"]
    body = deployment()
    body["spec"]["replicas"] = "two"
    code, status = kube.raw("POST", f"/apis/apps/v1/namespaces/{kube.namespace}/deployments", body)
    assert code == 400 and "cannot unmarshal string into Go struct field" in status["message"]


def test_an_unknown_field_is_a_400_under_strict_field_validation_and_dropped_otherwise(kube: Kube) -> None:
    body = deployment()
    body["spec"]["replica"] = 2
    path = f"/apis/apps/v1/namespaces/{kube.namespace}/deployments"
    code, status = kube.raw("POST", path, body, query={"fieldValidation": "Strict"})
    assert code == 400 and 'strict decoding error: unknown field "spec.replica"' in status["message"]
    code, created = kube.raw("POST", path, body, query={"fieldValidation": "Ignore"})
    assert code == 201 and "replica" not in created["spec"] and created["spec"]["replicas"] == 1


def test_env_var_names_and_container_names_are_checked(kube: Kube) -> None:
    body = deployment()
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "A=B", "value": "1"}]
    container["name"] = "Web_1"
    found = causes(_refused(kube.apps.create_namespaced_deployment, kube.namespace, body))
    assert found["spec.template.spec.containers[0].env[0].name"] == [
        "Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII "
        "characters other than '='"]
    assert any("a lowercase RFC 1123 label" in m for m in found["spec.template.spec.containers[0].name"])


def test_a_service_type_outside_the_enumeration_and_bad_ports_are_422(kube: Kube) -> None:
    body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"type": "Internal", "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 0}, {"port": 9000, "targetPort": "Not-A-Name"}]}}
    found = causes(_refused(kube.core.create_namespaced_service, kube.namespace, body))
    assert found["spec.type"] == ['Unsupported value: "Internal": supported values: "ClusterIP", "ExternalName", '
                                  '"LoadBalancer", "NodePort"']
    assert found["spec.ports[0].port"] == ["Invalid value: 0: must be between 1 and 65535, inclusive"]
    assert found["spec.ports[1].name"] == ["Required value"]
    assert "spec.ports[1].targetPort" in found


def test_names_follow_each_kinds_rule(kube: Kube) -> None:
    status = _refused(kube.core.create_namespace, {"metadata": {"name": "Not_A_Label"}})
    assert status["code"] == 422 and "metadata.name" in causes(status)
    status = _refused(kube.core.create_namespaced_service, kube.namespace, {
        "metadata": {"name": "9svc"}, "spec": {"ports": [{"port": 80}]}})
    assert any("DNS-1035 label" in m for m in causes(status)["metadata.name"])
    rbac = kubernetes.client.RbacAuthorizationV1Api(kube.client)
    role = rbac.create_namespaced_role(kube.namespace, {"metadata": {"name": "system:reader"}, "rules": []})
    assert role.metadata.name == "system:reader"


def test_the_deployment_selector_is_immutable(kube: Kube) -> None:
    kube.apps.create_namespaced_deployment(kube.namespace, deployment())
    patch = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}},
                      "template": {"metadata": {"labels": {"app": "web", "tier": "x"}}}}}
    status = _refused(kube.apps.patch_namespaced_deployment, "web", kube.namespace, patch)
    assert status["code"] == 422
    assert any("field is immutable" in m for m in causes(status)["spec.selector"])


def test_a_services_cluster_ip_may_not_change(kube: Kube) -> None:
    created = kube.core.create_namespaced_service(kube.namespace, {
        "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    ip = created.spec.cluster_ip
    other = ip.rsplit(".", 1)[0] + "." + str((int(ip.rsplit(".", 1)[1]) % 200) + 7)
    status = _refused(kube.core.patch_namespaced_service, "web", kube.namespace, {"spec": {"clusterIP": other}})
    assert status["code"] == 422 and "spec.clusterIPs[0]" in causes(status)
    kept = kube.core.replace_namespaced_service("web", kube.namespace, {
        "metadata": {"name": "web", "resourceVersion": created.metadata.resource_version},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 81}]}})
    assert kept.spec.cluster_ip == ip


def test_a_pods_spec_is_immutable_but_its_image_is_not(kube: Kube) -> None:
    pod = {"metadata": {"name": "p"}, "spec": copy.deepcopy(deployment()["spec"]["template"]["spec"])}
    kube.core.create_namespaced_pod(kube.namespace, pod)
    status = _refused(kube.core.patch_namespaced_pod, "p", kube.namespace,
                      {"spec": {"containers": [{"name": "web", "args": ["serve"]}]}})
    assert status["code"] == 422
    assert any(m.startswith("Forbidden: pod updates may not change fields other than") for m in causes(status)["spec"])
    patched = kube.core.patch_namespaced_pod("p", kube.namespace,
                                             {"spec": {"containers": [{"name": "web", "image": IMAGE + "-2"}]}})
    assert patched.spec.containers[0].image == IMAGE + "-2"


def _config_map(name: str) -> dict:
    return {"metadata": {"name": name}, "data": {"k": name}}


def test_limit_and_continue_chunk_a_list_and_a_changed_list_expires_the_token(kube: Kube) -> None:
    for n in range(5):
        kube.core.create_namespaced_config_map(kube.namespace, _config_map(f"c{n}"))
    first = kube.core.list_namespaced_config_map(kube.namespace, limit=2)
    assert [i.metadata.name for i in first.items] == ["c0", "c1"] and first.metadata.remaining_item_count == 3
    second = kube.core.list_namespaced_config_map(kube.namespace, limit=2, _continue=first.metadata._continue)
    assert [i.metadata.name for i in second.items] == ["c2", "c3"]
    assert second.metadata.resource_version == first.metadata.resource_version
    last = kube.core.list_namespaced_config_map(kube.namespace, limit=2, _continue=second.metadata._continue)
    assert [i.metadata.name for i in last.items] == ["c4"] and not last.metadata._continue
    if REAL_CLUSTER:
        return  # a real server serves the snapshot; the emulator refuses a token it cannot honour
    kube.core.create_namespaced_config_map(kube.namespace, _config_map("c5"))
    status = _refused(kube.core.list_namespaced_config_map, kube.namespace, limit=2,
                      _continue=first.metadata._continue)
    assert (status["code"], status["reason"]) == (410, "Expired")


def test_server_dry_run_answers_the_object_and_stores_nothing(kube: Kube) -> None:
    answered = kube.apps.create_namespaced_deployment(kube.namespace, deployment(), dry_run="All")
    assert answered.spec.strategy.type == "RollingUpdate"  # defaulted: admission ran
    assert not kube.apps.list_namespaced_deployment(kube.namespace).items
    body = deployment()
    body["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 0
    assert _refused(kube.apps.create_namespaced_deployment, kube.namespace, body, dry_run="All")["code"] == 422


@pytest.mark.skipif(REAL_CLUSTER, reason="a real server speaks protobuf; the emulator refuses it")
def test_a_protobuf_body_is_415_saying_to_send_json(kube: Kube) -> None:
    code, status = kube.raw("POST", "/api/v1/namespaces", b"\x6b\x38\x73\x00",
                            content_type="application/vnd.kubernetes.protobuf")
    assert (code, status["reason"]) == (415, "UnsupportedMediaType")
    assert "send application/json" in status["message"]


@pytest.mark.skipif(REAL_CLUSTER, reason="makes pods Ready by writing their status, which a kubelet would overwrite")
def test_the_eviction_api_honours_the_pod_disruption_budget(kube: Kube) -> None:
    policy = kubernetes.client.PolicyV1Api(kube.client)
    policy.create_namespaced_pod_disruption_budget(kube.namespace, {
        "metadata": {"name": "pp"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "pp"}}}})
    spec = deployment()["spec"]["template"]["spec"]
    for name in ("pp-a", "pp-b"):
        kube.core.create_namespaced_pod(kube.namespace, {"metadata": {"name": name, "labels": {"app": "pp"}},
                                                         "spec": spec})
        kube.core.patch_namespaced_pod_status(name, kube.namespace, {"status": {"conditions": [
            {"type": "Ready", "status": "True"}]}})
    evict = {"metadata": {"name": "pp-a", "namespace": kube.namespace}}
    kube.core.create_namespaced_pod_eviction("pp-a", kube.namespace, evict)
    assert [p.metadata.name for p in kube.core.list_namespaced_pod(kube.namespace).items] == ["pp-b"]
    status = _refused(kube.core.create_namespaced_pod_eviction, "pp-b", kube.namespace,
                      dict(evict, metadata={"name": "pp-b", "namespace": kube.namespace}))
    assert (status["code"], status["reason"]) == (429, "TooManyRequests")
    assert status["details"]["causes"][0]["message"] == ("The disruption budget pp needs 1 healthy pods and has 1 "
                                                         "currently")
