"""The EndpointSlice controller as a pure plan: Services and pods in, the slices to write out.

Development emulator, not for production. Pure. Each Service with a selector gets one IPv4
EndpointSlice (`generateName: <service>-`, labelled `kubernetes.io/service-name` and managed by
`endpointslice-controller.k8s.io`, owned by the Service) listing every pod its selector matches
that has an address: `ready` when the pod is Ready and not terminating (or always, with
`publishNotReadyAddresses`), `serving` when Ready, `terminating` once it is being deleted, as
kube-controller-manager writes them. A named `targetPort` is resolved through the first matching
pod's container ports (upstream splits the slice when pods resolve a name differently). Nothing
routes to these addresses: there is no kube-proxy (see docs/emulator.md); the slices are for what
reads them (Prometheus discovery, clients that list endpoints).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from liveplex.emulator.apiserver import kinds, selectors
from liveplex.emulator.controllers import deployments

Obj = Mapping[str, Any]
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
KEY = "discovery.k8s.io/endpointslices"


@dataclass(frozen=True, slots=True)
class Write:
    """Create `body` (`name` None: it has a generateName) or replace the slice `name` with it."""

    namespace: str
    name: str | None
    body: dict


@dataclass(frozen=True, slots=True)
class Remove:
    namespace: str
    name: str


Action = Write | Remove


def _port(target: object, pods: list[Obj], port: int) -> int | None:
    if isinstance(target, int) and target:
        return target
    if isinstance(target, str):
        for pod in pods:
            for container in pod["spec"].get("containers") or []:
                for p in container.get("ports") or []:
                    if p.get("name") == target:
                        return p["containerPort"]
        return None
    return port


def desired(service: Obj, pods: Iterable[Obj]) -> dict | None:
    """The slice `service` should have, or None when it has none (no selector, ExternalName)."""
    meta, spec = service["metadata"], service.get("spec") or {}
    selector = spec.get("selector")
    if not selector or spec.get("type") == "ExternalName":
        return None
    wanted = selectors.from_label_selector({"matchLabels": selector})
    mine = sorted((p for p in pods if p["metadata"].get("namespace") == meta["namespace"]
                   and selectors.matches_labels(wanted, p) and (p.get("status") or {}).get("podIP")
                   and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")),
                  key=lambda p: p["metadata"]["name"])
    endpoints = []
    for pod in mine:
        terminating = bool(pod["metadata"].get("deletionTimestamp"))
        serving = deployments.ready(dict(pod))
        endpoint = {"addresses": [pod["status"]["podIP"]],
                    "conditions": {"ready": spec.get("publishNotReadyAddresses") is True
                                   or (serving and not terminating), "serving": serving, "terminating": terminating},
                    "targetRef": {"kind": "Pod", "namespace": meta["namespace"], "name": pod["metadata"]["name"],
                                  "uid": pod["metadata"]["uid"]}}
        if pod["spec"].get("nodeName"):
            endpoint["nodeName"] = pod["spec"]["nodeName"]
        endpoints.append(endpoint)
    ports = []
    for port in spec.get("ports") or []:
        number = _port(port.get("targetPort"), mine, port.get("port"))
        if number is not None:
            ports.append({"name": port.get("name", ""), "port": number, "protocol": port.get("protocol", "TCP")})
    labels = {**(meta.get("labels") or {}), SERVICE_NAME: meta["name"], MANAGED_BY: CONTROLLER}
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"], "labels": labels,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports}


def _same(current: Obj, wanted: Obj) -> bool:
    return all(current.get(k) == wanted[k] for k in ("endpoints", "ports")) and \
        (current["metadata"].get("labels") or {}) == wanted["metadata"]["labels"]


def plan(snapshot: Iterable[tuple[kinds.ResourceType, dict]]) -> list[Action]:
    """The writes that make every managed slice what its Service and pods say."""
    services, pods, slices = [], [], []
    for rt, obj in snapshot:
        if rt.key == "/services" and not obj["metadata"].get("deletionTimestamp"):
            services.append(obj)
        elif rt.key == kinds.POD_KEY:
            pods.append(obj)
        elif rt.key == KEY and (obj["metadata"].get("labels") or {}).get(MANAGED_BY) == CONTROLLER:
            slices.append(obj)
    actions: list[Action] = []
    kept: set[tuple[str, str]] = set()
    for service in services:
        wanted = desired(service, pods)
        meta = service["metadata"]
        mine = [s for s in slices if s["metadata"]["namespace"] == meta["namespace"]
                and s["metadata"]["labels"].get(SERVICE_NAME) == meta["name"]]
        if wanted is None:
            continue
        if not mine:
            actions.append(Write(meta["namespace"], None, wanted))
            continue
        first = mine[0]
        kept.add((meta["namespace"], first["metadata"]["name"]))
        if not _same(first, wanted):
            body = {**wanted, "metadata": {**first["metadata"], "labels": wanted["metadata"]["labels"]}}
            actions.append(Write(meta["namespace"], first["metadata"]["name"], body))
    actions += [Remove(s["metadata"]["namespace"], s["metadata"]["name"]) for s in slices
                if (s["metadata"]["namespace"], s["metadata"]["name"]) not in kept
                and not s["metadata"].get("deletionTimestamp")]
    return actions
