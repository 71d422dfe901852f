"""Built-in types' defaults: what kube-apiserver fills in before it validates (validation.py checks).

Development emulator, not for production. Pure. Only the defaults that controllers, kubectl's
three-way apply or the kubelet read are filled in (replicas, rollout strategy, grace periods, probe
timings, Service ports and cluster IPs, Secret `stringData`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable

from liveplex.emulator.apiserver import deep

PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
"""kube-apiserver's probe defaults; the kubelet reads the defaulted object."""

GRACE_SECONDS = 30
"""`terminationGracePeriodSeconds` when a pod does not say."""

_WORKLOADS = ("apps/deployments", "apps/replicasets", "apps/statefulsets", "apps/daemonsets")


def _setdefaults(node: dict, **values: object) -> None:
    for key, value in values.items():
        node.setdefault(key, deep.clone(value))


def _probe(probe: dict) -> None:
    _setdefaults(probe, **PROBE_DEFAULTS)
    if "httpGet" in probe:
        _setdefaults(probe["httpGet"], path="/", scheme="HTTP")


def _container(container: dict) -> None:
    image = container.get("image", "")
    tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    _setdefaults(container, imagePullPolicy="IfNotPresent" if tagged or "@" in image else "Always",
                 terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File")
    for port in container.get("ports") or []:
        _setdefaults(port, protocol="TCP")
    for name in ("readinessProbe", "livenessProbe", "startupProbe"):
        if isinstance(container.get(name), dict):
            _probe(container[name])


def _pod_spec(spec: dict) -> None:
    _setdefaults(spec, restartPolicy="Always", terminationGracePeriodSeconds=GRACE_SECONDS,
                 dnsPolicy="ClusterFirst", schedulerName="default-scheduler", securityContext={})
    if "serviceAccountName" in spec or "serviceAccount" not in spec:
        spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        _container(container)


def default(key: str, obj: dict, cluster_ip: Callable[[], str]) -> dict:
    """`obj` with the defaults of its type (storage key `key`); `cluster_ip` allocates a Service address."""
    out = deep.clone(obj)
    if key == "/pods":
        _pod_spec(out.setdefault("spec", {}))
    elif key in _WORKLOADS:
        spec = out.setdefault("spec", {})
        if key != "apps/daemonsets":
            spec.setdefault("replicas", 1)
        if key != "apps/replicasets":  # a ReplicaSet has no history of its own
            spec.setdefault("revisionHistoryLimit", 10)
        _pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
        if key == "apps/deployments":
            spec.setdefault("progressDeadlineSeconds", 600)
            strategy = spec.setdefault("strategy", {})
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                _setdefaults(strategy.setdefault("rollingUpdate", {}), maxSurge="25%", maxUnavailable="25%")
    elif key == "/services":
        spec = out.setdefault("spec", {})
        _setdefaults(spec, type="ClusterIP", sessionAffinity="None", ipFamilies=["IPv4"],
                     ipFamilyPolicy="SingleStack", internalTrafficPolicy="Cluster")
        for port in spec.get("ports") or []:
            _setdefaults(port, protocol="TCP", targetPort=port.get("port"))
        if not spec.get("clusterIP"):
            spec["clusterIP"] = cluster_ip()
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    elif key == "/secrets":
        out.setdefault("type", "Opaque")
        plain = out.pop("stringData", None) or {}
        data = out.setdefault("data", {})
        data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in plain.items()})
    elif key == "/namespaces":
        out.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        out.setdefault("status", {}).setdefault("phase", "Active")
        name = out.get("metadata", {}).get("name", "")
        out["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    return out
