"""The Pod Security Standards' "restricted" profile (with the "baseline" it includes), as published at
https://kubernetes.io/docs/concepts/security/pod-security-standards/ and enforced by the
pod-security-admission checks of Kubernetes 1.35: one pure function per control, applied to a pod
spec (a pod's, or a workload's template). A test helper: no cluster's admission runs here.

`image` volumes are left out of the allowed volume types on purpose (older pod-security-admission
releases refuse them; recent ones allow them): a pod that passes here passes every release.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

Obj = Mapping[str, Any]

ALLOWED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                             "projected", "secret"})
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                          "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
                          "net.ipv4.ip_local_reserved_ports",
                          "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                          "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})


def containers(pod: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from pod.get(key, ())


def _ctx(obj: Obj) -> Obj:
    return obj.get("securityContext") or {}


def _host_namespaces(pod: Obj, meta: Obj) -> bool:
    return not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))


def _host_process(pod: Obj, meta: Obj) -> bool:
    return not any((_ctx(o).get("windowsOptions") or {}).get("hostProcess") for o in (pod, *containers(pod)))


def _privileged(pod: Obj, meta: Obj) -> bool:
    return not any(_ctx(c).get("privileged") for c in containers(pod))


def _host_ports(pod: Obj, meta: Obj) -> bool:
    return all(not p.get("hostPort") for c in containers(pod) for p in c.get("ports", ()))


def _apparmor(pod: Obj, meta: Obj) -> bool:
    annotations = (v for k, v in (meta.get("annotations") or {}).items()
                   if k.startswith("container.apparmor.security.beta.kubernetes.io/"))
    profiles = [(_ctx(o).get("appArmorProfile") or {}).get("type") for o in (pod, *containers(pod))]
    return (all(v == "runtime/default" or v.startswith("localhost/") for v in annotations)
            and all(t in (None, "RuntimeDefault", "Localhost") for t in profiles))


def _selinux(pod: Obj, meta: Obj) -> bool:
    options = [_ctx(o).get("seLinuxOptions") or {} for o in (pod, *containers(pod))]
    return all(o.get("type", "") in SELINUX_TYPES and not o.get("user") and not o.get("role") for o in options)


def _proc_mount(pod: Obj, meta: Obj) -> bool:
    return all(_ctx(c).get("procMount", "Default") == "Default" for c in containers(pod))


def _sysctls(pod: Obj, meta: Obj) -> bool:
    return all(s["name"] in SAFE_SYSCTLS for s in _ctx(pod).get("sysctls", ()))


def _probe_hosts(pod: Obj, meta: Obj) -> bool:
    """1.34+: probes and lifecycle handlers may not name a host (they could reach another pod's)."""
    handlers = [c.get(k) or {} for c in containers(pod) for k in ("livenessProbe", "readinessProbe", "startupProbe")]
    handlers += [h for c in containers(pod) for h in (c.get("lifecycle") or {}).values()]
    return all(not (h.get(kind) or {}).get("host") for h in handlers for kind in ("httpGet", "tcpSocket"))


def _volume_types(pod: Obj, meta: Obj) -> bool:
    return all(set(v) - {"name"} <= ALLOWED_VOLUMES for v in pod.get("volumes", ()))


def _privilege_escalation(pod: Obj, meta: Obj) -> bool:
    return all(_ctx(c).get("allowPrivilegeEscalation") is False for c in containers(pod))


def _run_as_non_root(pod: Obj, meta: Obj) -> bool:
    values = [_ctx(c).get("runAsNonRoot") for c in containers(pod)]
    if False in values:
        return False
    return _ctx(pod).get("runAsNonRoot") is True or all(v is True for v in values)


def _run_as_user(pod: Obj, meta: Obj) -> bool:
    return all(_ctx(o).get("runAsUser") != 0 for o in (pod, *containers(pod)))


def _seccomp(pod: Obj, meta: Obj) -> bool:
    good = ("RuntimeDefault", "Localhost")
    types = [(_ctx(c).get("seccompProfile") or {}).get("type") for c in containers(pod)]
    if any(t is not None and t not in good for t in types):
        return False
    return (_ctx(pod).get("seccompProfile") or {}).get("type") in good or all(t in good for t in types)


def _capabilities(pod: Obj, meta: Obj) -> bool:
    caps = [_ctx(c).get("capabilities") or {} for c in containers(pod)]
    return all("ALL" in c.get("drop", ()) and set(c.get("add", ())) <= {"NET_BIND_SERVICE"} for c in caps)


CONTROLS: dict[str, Callable[[Obj, Obj], bool]] = {
    "host namespaces": _host_namespaces,
    "HostProcess": _host_process,
    "privileged containers": _privileged,
    "host ports": _host_ports,
    "AppArmor": _apparmor,
    "SELinux": _selinux,
    "/proc mount type": _proc_mount,
    "sysctls": _sysctls,
    "probe and lifecycle hosts": _probe_hosts,
    "volume types": _volume_types,  # restricted's list; it includes baseline's "no hostPath"
    "privilege escalation": _privilege_escalation,
    "running as non-root": _run_as_non_root,
    "running as non-root user": _run_as_user,
    "seccomp": _seccomp,
    "capabilities": _capabilities,  # restricted's rule; it includes baseline's add list
}
"""Control name (as the standard's tables name it) -> holds for (pod spec, pod metadata)."""


def violations(pod: Obj, meta: Obj | None = None) -> list[str]:
    """The restricted profile's controls `pod` breaks; [] when Pod Security "restricted" admits it."""
    return [name for name, holds in CONTROLS.items() if not holds(pod, meta or {})]


def pod_templates(objs: list[Obj]) -> Iterator[tuple[str, Obj, Obj]]:
    """(`Kind/name`, pod spec, pod metadata) of every pod and pod template among `objs`."""
    for obj in objs:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "Pod":
            yield name, obj["spec"], obj["metadata"]
        elif "template" in obj.get("spec", {}) and "spec" in obj["spec"]["template"]:
            yield name, obj["spec"]["template"]["spec"], obj["spec"]["template"].get("metadata", {})
