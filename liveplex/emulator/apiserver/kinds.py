"""The resource types the emulator serves: the built-in table, and the types a CRD adds.

Development emulator, not for production. Pure. A `ResourceType` is everything discovery, storage
and the HTTP routes need to know about one resource; `Registry` maps URL coordinates
(group, version, plural) onto them and changes only when a CRD is written or removed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """A scale subresource's mapping onto the object (`.spec.replicas` style JSON paths)."""

    spec: str
    status: str
    selector: str | None


@dataclass(frozen=True, slots=True)
class Column:
    """One `additionalPrinterColumns` entry of a CRD."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str = ""
    format: str = ""


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    versions: tuple[str, ...]
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False
    scale: ScalePaths | None = None
    generation: bool = False
    """Whether `metadata.generation` is kept (it is for every type with a spec that controllers observe)."""
    columns: tuple[Column, ...] = ()
    schemas: Mapping[str, dict] = field(default_factory=dict)
    """openAPIV3Schema per version, custom resources only."""
    custom: bool = False
    verbs: tuple[str, ...] = VERBS
    """What discovery lists; reviews are create-only and never stored."""
    field_labels: Mapping[str, str] | None = None
    """The field selector labels the kind's own field label conversion takes, each to the path it
    selects in the object; None: upstream's default (`metadata.name`, `metadata.namespace`)."""

    @property
    def key(self) -> str:
        """The storage key: one per group and plural, whatever the version."""
        return f"{self.group}/{self.plural}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def preferred(self) -> str:
        return self.versions[0]


def _t(group: str, version: str, kind: str, plural: str, namespaced: bool = True, short: tuple[str, ...] = (),
       status: bool = False, scale: bool = False, generation: bool = False, versions: tuple[str, ...] = (),
       categories: tuple[str, ...] = (), verbs: tuple[str, ...] = VERBS,
       fields: Mapping[str, str] | None = None) -> ResourceType:
    return ResourceType(group, (version, *versions), kind, plural, namespaced, short, categories, status,
                        ScalePaths(".spec.replicas", ".status.replicas", None) if scale else None,
                        generation or status, verbs=verbs, field_labels=fields)


def _fields(*labels: str, renamed: Mapping[str, str] | None = None) -> dict[str, str]:
    """Field labels that select their own path, and `renamed` ones (label -> path)."""
    return {**{label: label for label in labels}, **(renamed or {})}


_META = ("metadata.name", "metadata.namespace")
_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
# pkg/apis/core/v1/conversion.go, apps/v1 and events/v1 AddFieldLabelConversionFunc (v1.32)
_POD_FIELDS = _fields(*_META, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                      "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
                      renamed={"spec.host": "spec.nodeName", "status.podIPs": "status.podIP"})
_EVENT_FIELDS = _fields(*_META, *(f"involvedObject.{f}" for f in _INVOLVED), "reason", "reportingComponent", "type",
                        renamed={"source": "source.component"})
_EVENTS_V1_FIELDS = _fields(*_META, *(f"regarding.{f}" for f in _INVOLVED), "reason", "reportingController", "type",
                            renamed={"source": "deprecatedSource.component"})


_ALL = ("all",)
BUILTINS: tuple[ResourceType, ...] = (
    _t("", "v1", "Namespace", "namespaces", namespaced=False, short=("ns",), status=True,
       fields=_fields("metadata.name", "status.phase")),
    _t("", "v1", "Node", "nodes", namespaced=False, short=("no",), status=True,
       fields=_fields("metadata.name", "spec.unschedulable")),
    _t("", "v1", "Pod", "pods", short=("po",), status=True, categories=_ALL, fields=_POD_FIELDS),
    _t("", "v1", "Service", "services", short=("svc",), status=True, categories=_ALL,
       fields=_fields(*_META, "spec.clusterIP", "spec.type")),
    _t("", "v1", "Endpoints", "endpoints", short=("ep",)),
    _t("", "v1", "Event", "events", short=("ev",), fields=_EVENT_FIELDS),
    _t("", "v1", "ConfigMap", "configmaps", short=("cm",)),
    _t("", "v1", "Secret", "secrets", fields=_fields(*_META, "type")),
    _t("", "v1", "ServiceAccount", "serviceaccounts", short=("sa",)),
    _t("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", short=("pvc",), status=True),
    _t("apps", "v1", "Deployment", "deployments", short=("deploy",), status=True, scale=True, categories=_ALL),
    _t("apps", "v1", "ReplicaSet", "replicasets", short=("rs",), status=True, scale=True, categories=_ALL),
    _t("apps", "v1", "StatefulSet", "statefulsets", short=("sts",), status=True, scale=True, categories=_ALL,
       fields=_fields(*_META, "status.successful")),
    _t("apps", "v1", "DaemonSet", "daemonsets", short=("ds",), status=True, categories=_ALL),
    _t("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", short=("pdb",), status=True),
    _t("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", short=("hpa",), status=True,
       versions=("v1",), categories=_ALL),
    _t("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", short=("netpol",), generation=True),
    _t("networking.k8s.io", "v1", "Ingress", "ingresses", short=("ing",), status=True),
    _t("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    _t("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings"),
    _t("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False),
    _t("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    _t("coordination.k8s.io", "v1", "Lease", "leases"),
    _t("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
    _t("events.k8s.io", "v1", "Event", "events", short=("ev",), fields=_EVENTS_V1_FIELDS),
    _t("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False,
       short=("crd", "crds"), status=True),
    _t("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", namespaced=False,
       verbs=("create",)),
)

CRD_KEY = "apiextensions.k8s.io/customresourcedefinitions"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
"""The finalizer every CRD gets: its custom resources go (with their own finalizers) before it does."""
ACCESS_REVIEW_KEY = "authorization.k8s.io/selfsubjectaccessreviews"
SERVICE_ACCOUNT_KEY = "/serviceaccounts"
NAMESPACE_KEY = "/namespaces"
POD_KEY = "/pods"


def from_crd(crd: Mapping) -> ResourceType:
    """The served type a CRD declares; subresources, columns and schemas come from its storage version."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec.get("versions", []) if v.get("served", True)]
    served.sort(key=lambda v: not v.get("storage", False))
    lead = served[0] if served else {}
    sub = lead.get("subresources") or {}
    scale = sub.get("scale")
    columns = tuple(Column(c["name"], c.get("type", "string"), c["jsonPath"], int(c.get("priority", 0)),
                           c.get("description", ""), c.get("format", ""))
                    for c in lead.get("additionalPrinterColumns") or [])
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    selectable = [f["jsonPath"].lstrip(".") for f in lead.get("selectableFields") or [] if f.get("jsonPath")]
    return ResourceType(
        group=spec["group"], versions=tuple(v["name"] for v in served), kind=names["kind"], plural=names["plural"],
        namespaced=namespaced, short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()), status="status" in sub,
        scale=ScalePaths(scale["specReplicasPath"], scale["statusReplicasPath"], scale.get("labelSelectorPath"))
        if scale is not None else None,
        generation=True, columns=columns,
        schemas={v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in served}, custom=True,
        field_labels=_fields(*_META[:1 + namespaced], *selectable))  # apiextensions' crConverter.ConvertFieldLabel


class Registry:
    """Built-ins plus installed CRDs; lookups by URL coordinates, by storage key or by kind."""

    def __init__(self) -> None:
        self._by_key: dict[str, ResourceType] = {t.key: t for t in BUILTINS}

    def install(self, rt: ResourceType) -> None:
        self._by_key[rt.key] = rt

    def remove(self, key: str) -> None:
        self._by_key.pop(key, None)

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._by_key.values())

    def by_key(self, key: str) -> ResourceType:
        """A type the caller knows is there (a built-in, a CRD it installed): KeyError otherwise."""
        return self._by_key[key]

    def find_key(self, key: str) -> ResourceType | None:
        """A type that may be gone (a CRD deleted since its objects were stored)."""
        return self._by_key.get(key)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._by_key.get(f"{group}/{plural}")
        return rt if rt is not None and version in rt.versions else None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return next((t for t in self if t.group == group and t.kind == kind and version in t.versions), None)

    def group_versions(self) -> dict[str, list[str]]:
        """group -> versions in preference order, built-in groups first (the legacy group is "")."""
        out: dict[str, list[str]] = {}
        for rt in self:
            versions = out.setdefault(rt.group, [])
            versions.extend(v for v in rt.versions if v not in versions)
        return out
