"""Contract: authentication and RBAC as a real kube-apiserver answers them (401, 403 in the RBAC
authorizer's words, TokenRequest, SelfSubjectAccessReview), through the official client, so the
opt-in suite runs the same tests on a real cluster."""

from __future__ import annotations

import json

import kubernetes
import pytest

from liveplex.emulator.apiserver import rbac
from liveplex.emulator.apiserver.auth import User

from .contract import Kube, contract_emulator, kube  # noqa: F401 (fixtures)


def _as(kube: Kube, token: str) -> kubernetes.client.ApiClient:
    config = kube.client.configuration
    other = kubernetes.client.Configuration(host=config.host)
    other.ssl_ca_cert, other.verify_ssl = config.ssl_ca_cert, config.verify_ssl
    other.api_key = {"authorization": f"Bearer {token}"}
    return kubernetes.client.ApiClient(other)


def _token(kube: Kube, account: str) -> str:
    kube.core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": account}})
    issued = kube.core.create_namespaced_service_account_token(account, kube.namespace, {"spec": {}})
    return issued.status.token


def _status(call: object, *args: object) -> tuple[int, dict]:
    with pytest.raises(kubernetes.client.ApiException) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.status, json.loads(caught.value.body or "{}")


def test_a_token_nobody_issued_is_401(kube: Kube) -> None:
    code, status = _status(kubernetes.client.CoreV1Api(_as(kube, "not-a-token")).list_namespaced_pod, kube.namespace)
    assert (code, status.get("reason")) == (401, "Unauthorized")


def test_a_service_account_without_a_binding_is_forbidden_in_rbacs_words(kube: Kube) -> None:
    core = kubernetes.client.CoreV1Api(_as(kube, _token(kube, "nobody")))
    code, status = _status(core.list_namespaced_pod, kube.namespace)
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (f'pods is forbidden: User "system:serviceaccount:{kube.namespace}:nobody" cannot '
                                 f'list resource "pods" in API group "" in the namespace "{kube.namespace}"')
    code, status = _status(core.read_namespace, kube.namespace)
    assert status["message"].endswith('cannot get resource "namespaces" in API group "" at the cluster scope')


def test_a_role_binding_grants_exactly_its_rules(kube: Kube) -> None:
    rbac_api = kubernetes.client.RbacAuthorizationV1Api(kube.client)
    rbac_api.create_namespaced_role(kube.namespace, {"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"], "resourceNames": []},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]})
    token = _token(kube, "reader")
    rbac_api.create_namespaced_role_binding(kube.namespace, {
        "metadata": {"name": "reader"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                    "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": kube.namespace}]})
    core = kubernetes.client.CoreV1Api(_as(kube, token))
    assert core.list_namespaced_config_map(kube.namespace).items is not None
    code, _ = _status(core.create_namespaced_config_map, kube.namespace, {"metadata": {"name": "x"}})
    assert code == 403
    code, _ = _status(core.list_namespaced_pod, kube.namespace)
    assert code == 403
    reviews = kubernetes.client.AuthorizationV1Api(_as(kube, token))
    answers = [reviews.create_self_subject_access_review({"spec": {"resourceAttributes": {
        "namespace": kube.namespace, "verb": verb, "resource": resource}}}).status.allowed
        for verb, resource in (("list", "configmaps"), ("delete", "configmaps"), ("watch", "pods"))]
    assert answers == [True, False, False]


def test_the_admin_kubeconfig_is_cluster_admin(kube: Kube) -> None:
    reviews = kubernetes.client.AuthorizationV1Api(kube.client)
    review = reviews.create_self_subject_access_review({"spec": {"resourceAttributes": {
        "verb": "delete", "group": "apiextensions.k8s.io", "resource": "customresourcedefinitions"}}})
    assert review.status.allowed


# --- the authorizer as a pure function ------------------------------------------------------------

SA = User("system:serviceaccount:voice:op", ("system:serviceaccounts", "system:serviceaccounts:voice",
                                             "system:authenticated"))


def _policy(*bindings: dict, roles: dict | None = None, cluster_roles: dict | None = None) -> rbac.Policy:
    return rbac.Policy(roles=roles or {}, cluster_roles=cluster_roles or {},
                       role_bindings=[b for b in bindings if b["kind"] == "RoleBinding"],
                       cluster_role_bindings=[b for b in bindings if b["kind"] == "ClusterRoleBinding"])


def _binding(kind: str, role_kind: str, namespace: str = "voice", subject: dict | None = None) -> dict:
    return {"kind": kind, "metadata": {"name": "b", "namespace": namespace},
            "roleRef": {"kind": role_kind, "name": "r"},
            "subjects": [subject or {"kind": "ServiceAccount", "name": "op", "namespace": "voice"}]}


@pytest.mark.parametrize(("rule", "attrs", "allowed"), [
    ({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]},
     rbac.Attributes("patch", "apps", "deployments", namespace="voice", name="pp"), True),
    ({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
     rbac.Attributes("get", "apps", "deployments", "scale", "voice", "pp"), False),
    ({"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get"]},
     rbac.Attributes("get", "apps", "deployments", "scale", "voice", "pp"), True),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["a"]},
     rbac.Attributes("get", "", "pods", namespace="voice", name="b"), False),
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["list"]},
     rbac.Attributes("list", "live.liveplex.io", "liveengines", namespace="voice"), True),
    ({"nonResourceURLs": ["/metrics*"], "verbs": ["get"]}, rbac.Attributes("get", path="/metrics/cadvisor"), True),
])
def test_rules(rule: dict, attrs: rbac.Attributes, allowed: bool) -> None:
    assert rbac.rule_allows(rule, attrs) is allowed


def test_bindings_scope_roles_and_match_subjects() -> None:
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    here, there = (rbac.Attributes("list", "", "pods", namespace=ns) for ns in ("voice", "other"))
    via_role = _policy(_binding("RoleBinding", "Role"), roles={("voice", "r"): {"rules": [rule]}})
    assert rbac.allowed(via_role, SA, here) and not rbac.allowed(via_role, SA, there)
    cluster_role_in_namespace = _policy(_binding("RoleBinding", "ClusterRole"), cluster_roles={"r": {"rules": [rule]}})
    assert rbac.allowed(cluster_role_in_namespace, SA, here)
    assert not rbac.allowed(cluster_role_in_namespace, SA, there)
    everywhere = _policy(_binding("ClusterRoleBinding", "ClusterRole", subject={
        "kind": "Group", "name": "system:serviceaccounts:voice"}), cluster_roles={"r": {"rules": [rule]}})
    assert rbac.allowed(everywhere, SA, there)
    other_account = _policy(_binding("ClusterRoleBinding", "ClusterRole", subject={
        "kind": "ServiceAccount", "name": "op", "namespace": "other"}), cluster_roles={"r": {"rules": [rule]}})
    assert not rbac.allowed(other_account, SA, here)
    assert rbac.allowed(_policy(), SA, rbac.Attributes("get", path="/apis"))


def test_only_newly_set_block_owner_deletion_is_checked() -> None:
    ref = {"uid": "u1", "blockOwnerDeletion": True}
    assert rbac.newly_blocking(None, {"metadata": {"ownerReferences": [ref]}}) == [ref]
    assert rbac.newly_blocking({"metadata": {"ownerReferences": [ref]}}, {"metadata": {"ownerReferences": [ref]}}) == []
    assert rbac.newly_blocking(None, {"metadata": {"ownerReferences": [dict(ref, blockOwnerDeletion=False)]}}) == []
