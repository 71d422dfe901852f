"""Builders for the objects the operator reads: LiveEngines, Deployments and pods, as the API stores them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from liveplex.operator import names

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
Obj = dict[str, Any]


def example(name: str) -> Obj:
    """An example LiveEngine from examples/, as a user would apply it."""
    return yaml.safe_load((EXAMPLES / f"liveengine-{name}.yaml").read_text())


def liveengine(spec: Obj | None = None, *, name: str = "pp", namespace: str = "voice", generation: int = 1,
               created: str = "2026-01-01T00:00:00Z", labels: dict[str, str] | None = None,
               status: Obj | None = None) -> Obj:
    body: Obj = {
        "apiVersion": names.API_VERSION, "kind": names.KIND,
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "generation": generation,
                     "creationTimestamp": created, "labels": labels or {}},
        "spec": copy.deepcopy(spec) if spec is not None else {"engine": {"kind": "sim"}},
    }
    if status is not None:
        body["status"] = status
    return body


def sim_spec(**overrides: Any) -> Obj:
    return {"engine": {"kind": "sim"}, "model": {"name": "liveplex-sim"}, **overrides}


def personaplex_spec(**overrides: Any) -> Obj:
    return {"engine": {"kind": "personaplex"},
            "model": {"name": "nvidia/personaplex-7b-v1", "source": {"pvc": {"claimName": "weights"}}},
            **overrides}


def deployment(*, name: str = "pp", namespace: str = "voice", replicas: int = 1, ready: int = 0,
               updated: int | None = None, total: int | None = None, available: int | None = None,
               generation: int = 1, observed: int | None = None, conditions: list[Obj] | None = None) -> Obj:
    total = replicas if total is None else total
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": generation if observed is None else observed, "replicas": total,
                   "updatedReplicas": total if updated is None else updated, "readyReplicas": ready,
                   "availableReplicas": ready if available is None else available,
                   "conditions": conditions or []},
    }


def pod(name: str, *, owner: str = "pp", namespace: str = "voice", ready: bool = False, started: bool = False,
        running: bool = True, waiting: str | None = None, unschedulable: str | None = None,
        annotations: dict[str, str] | None = None, deleting: bool = False) -> Obj:
    state: Obj = {"running": {"startedAt": "2026-01-01T00:00:00Z"}} if running else {}
    if waiting is not None:
        state = {"waiting": {"reason": waiting, "message": f"{waiting} for the image"}}
    conditions = [{"type": "Ready", "status": str(ready)}]
    if unschedulable is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": unschedulable})
    statuses = [] if unschedulable is not None else [
        {"name": names.CONTAINER, "ready": ready, "started": started, "state": state}]
    meta: Obj = {"name": name, "namespace": namespace, "labels": names.selector(owner),
                 "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:10:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "status": {"phase": "Running" if running else "Pending", "conditions": conditions,
                       "containerStatuses": statuses}}
