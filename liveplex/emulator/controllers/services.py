"""Service names and Service ports for the podman runtime's containers, decided purely: what a
cluster's DNS and kube-proxy give a pod.

Development emulator, not for production. Pure. Each Service gets a loopback address of its own
(its stand-in virtual IP; `spec.clusterIP` stays the 10.96.x.y the API server assigned). A
container's `/etc/hosts` names that address as `<svc>.<ns>.svc.cluster.local`, `<svc>.<ns>.svc`,
`<svc>.<ns>` and, in the pod's own namespace, `<svc>`; the proxy (`proxy.py`) listens there on
every Service port and forwards each connection to one ready endpoint of the Service's
EndpointSlices, on the slice's port. `default/kubernetes` forwards to the API server itself, so
`https://kubernetes.default.svc` (kopf's in-cluster address) works. Headless Services, UDP,
session affinity, `externalTrafficPolicy` and NodePorts are not emulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from liveplex.emulator.controllers import endpointslices

Obj = Mapping[str, Any]
Key = tuple[str, str]
"""(namespace, name) of a Service."""
Backend = tuple[str, int]
API_SERVICE: Key = ("default", "kubernetes")
CLUSTER_DOMAIN = "cluster.local"


def proxied(services: Iterable[Obj]) -> dict[Key, list[int]]:
    """The Services the proxy serves and their TCP ports (headless and ExternalName ones it does not)."""
    out: dict[Key, list[int]] = {}
    for svc in services:
        spec = svc.get("spec") or {}
        if spec.get("type") == "ExternalName" or spec.get("clusterIP") == "None":
            continue
        ports = [int(p["port"]) for p in spec.get("ports") or [] if p.get("protocol", "TCP") == "TCP"]
        out[svc["metadata"]["namespace"], svc["metadata"]["name"]] = ports
    return out


def routes(services: Iterable[Obj], slices: Iterable[Obj], api: Backend) -> dict[tuple[Key, int], list[Backend]]:
    """(Service, port) -> the ready endpoints a connection to it may go to, on the slice's port."""
    by_service: dict[Key, list[Obj]] = {}
    for s in slices:
        name = (s["metadata"].get("labels") or {}).get(endpointslices.SERVICE_NAME)
        if name:
            by_service.setdefault((s["metadata"]["namespace"], name), []).append(s)
    out: dict[tuple[Key, int], list[Backend]] = {}
    for svc in services:
        key = (svc["metadata"]["namespace"], svc["metadata"]["name"])
        for port in (svc.get("spec") or {}).get("ports") or []:
            if key == API_SERVICE:
                out[key, int(port["port"])] = [api]
                continue
            backends = []
            for s in by_service.get(key, ()):
                target = next((p["port"] for p in s.get("ports") or [] if p.get("name", "") == port.get("name", "")),
                              None)
                if target is None:
                    continue
                backends += [(address, int(target)) for e in s.get("endpoints") or []
                             if (e.get("conditions") or {}).get("ready") for address in e.get("addresses") or []]
            out[key, int(port["port"])] = backends
    return out


def hosts(namespace: str, pod_name: str, pod_ip: str, addresses: Mapping[Key, str]) -> str:
    """A pod's `/etc/hosts`: localhost, itself, and every proxied Service by its DNS names."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{pod_ip}\t{pod_name}"]
    for (ns, name), address in sorted(addresses.items()):
        names = [f"{name}.{ns}.svc.{CLUSTER_DOMAIN}", f"{name}.{ns}.svc", f"{name}.{ns}"]
        lines.append("\t".join([address, *names, *([name] if ns == namespace else [])]))
    return "\n".join(lines) + "\n"
