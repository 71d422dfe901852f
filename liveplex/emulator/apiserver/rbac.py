"""The RBAC authorizer: Roles, ClusterRoles and their bindings evaluated as kube-apiserver does.

Development emulator, not for production. Pure. A request's attributes (verb, API group, resource,
subresource, namespace, name, or a non-resource path) are allowed when a rule of a role bound to
the user, one of their groups or their ServiceAccount allows them: ClusterRoleBindings everywhere,
RoleBindings (to a Role or a ClusterRole) in their namespace. `system:masters` is allowed
everything, as upstream's superuser group. Every authenticated user may read discovery, OpenAPI
and health paths (`system:discovery`, `system:basic-user`, `system:public-info-viewer`) and review
their own access. ClusterRole aggregation is not emulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from liveplex.emulator.apiserver.auth import AUTHENTICATED, MASTERS, User

Obj = Mapping[str, Any]

DISCOVERY = ("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/", "/healthz",
             "/livez", "/readyz")
"""Non-resource URLs `system:discovery` and `system:public-info-viewer` open to authenticated users."""
SELF_REVIEWS = (("authorization.k8s.io", "selfsubjectaccessreviews"),
                ("authorization.k8s.io", "selfsubjectrulesreviews"),
                ("authentication.k8s.io", "selfsubjectreviews"))
"""What `system:basic-user` lets every authenticated user create."""


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request does, as the authorizer sees it."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    """Set for non-resource requests only."""

    @property
    def resource_request(self) -> bool:
        return not self.path


@dataclass(frozen=True, slots=True)
class Policy:
    """The RBAC objects in force (as stored)."""

    roles: Mapping[tuple[str, str], Obj]
    cluster_roles: Mapping[str, Obj]
    role_bindings: Iterable[Obj]
    cluster_role_bindings: Iterable[Obj]


def _matches(allowed: Iterable[str], value: str) -> bool:
    allowed = list(allowed or ())
    return "*" in allowed or value in allowed


def _path_matches(allowed: Iterable[str], path: str) -> bool:
    return any(a == "*" or a == path or (a.endswith("*") and path.startswith(a[:-1])) for a in allowed or ())


def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs") or (), attrs.verb):
        return False
    if not attrs.resource_request:
        return _path_matches(rule.get("nonResourceURLs") or (), attrs.path)
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or ()
    if not (_matches(resources, resource) or (attrs.subresource and f"*/{attrs.subresource}" in resources)):
        return False
    if not _matches(rule.get("apiGroups") or (), attrs.group):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _subject_matches(subject: Obj, user: User, namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        return user.service_account == (subject.get("namespace") or namespace, subject.get("name"))
    return False


def _rules(policy: Policy, ref: Obj, namespace: str) -> list[Obj]:
    if ref.get("kind") == "ClusterRole":
        role = policy.cluster_roles.get(ref.get("name", ""))
    else:
        role = policy.roles.get((namespace, ref.get("name", "")))
    return list((role or {}).get("rules") or [])


def _builtin(user: User, attrs: Attributes) -> bool:
    """The default cluster roles every cluster binds (the parts of them that matter here)."""
    if MASTERS in user.groups:
        return True
    if AUTHENTICATED not in user.groups:
        return False
    if not attrs.resource_request:
        return attrs.verb == "get" and _path_matches(DISCOVERY, attrs.path)
    return attrs.verb == "create" and (attrs.group, attrs.resource) in SELF_REVIEWS


def allowed(policy: Policy, user: User, attrs: Attributes) -> bool:
    if _builtin(user, attrs):
        return True
    for binding in policy.cluster_role_bindings:
        if any(_subject_matches(s, user, "") for s in binding.get("subjects") or ()):
            if any(rule_allows(r, attrs) for r in _rules(policy, binding.get("roleRef") or {}, "")):
                return True
    if not attrs.namespace or not attrs.resource_request:
        return False
    for binding in policy.role_bindings:
        meta = binding.get("metadata") or {}
        if meta.get("namespace") != attrs.namespace:
            continue
        if any(_subject_matches(s, user, attrs.namespace) for s in binding.get("subjects") or ()):
            if any(rule_allows(r, attrs) for r in _rules(policy, binding.get("roleRef") or {}, attrs.namespace)):
                return True
    return False


def denial(user: User, attrs: Attributes) -> str:
    """The reason upstream's RBAC authorizer gives, after `<thing> is forbidden: `."""
    if not attrs.resource_request:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}" {where}'


def newly_blocking(old: Obj | None, new: Obj) -> list[Obj]:
    """The ownerReferences with `blockOwnerDeletion` that `new` sets and `old` did not: the ones
    OwnerReferencesPermissionEnforcement checks (the writer must be able to update the owner's
    `finalizers` subresource)."""
    before = {(r.get("uid"), r.get("blockOwnerDeletion")) for r in _owner_references(old or {})}
    return [r for r in _owner_references(new)
            if r.get("blockOwnerDeletion") is True and (r.get("uid"), True) not in before
            and all(isinstance(r.get(k, ""), str) for k in ("apiVersion", "kind", "name", "uid"))]


def _owner_references(obj: Obj) -> list[Obj]:
    """The well-formed references of an object or a patch (a patch's shape is checked only once applied)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []
