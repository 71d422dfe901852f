"""The `meta.k8s.io/v1` Table form that `kubectl get` asks for: printer columns evaluated server-side.

Development emulator, not for production. Pure: the caller passes the current time for ages.
Custom resources get their CRD's `additionalPrinterColumns` (a JSONPath subset: `.a.b`, `[n]`,
`[*]`, `['key.with.dots']`, `[?(@.k=="v")]`); a few built-ins get columns close to
kube-apiserver's own; everything else gets NAME and AGE.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from liveplex.emulator.apiserver import deep, kinds

_TOKEN = re.compile(r"""\.([A-Za-z0-9_\-$]+)|\[(\d+)\]|\[\*\]|\['([^']*)'\]"""
                    r"""|\[\?\(@\.([A-Za-z0-9_.]+)\s*==\s*["']([^"']*)["']\)\]""")


def json_path(obj: object, path: str) -> list[object]:
    """Every value `path` selects in `obj` (kubectl's JSONPath subset used by printer columns)."""
    nodes: list[object] = [obj]
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            return []
        key, index, quoted, filter_key, filter_value = match.groups()
        step: list[object] = []
        for node in nodes:
            if key is not None or quoted is not None:
                name = key if key is not None else quoted
                if isinstance(node, dict) and name in node:
                    step.append(node[name])
            elif index is not None:
                if isinstance(node, list) and int(index) < len(node):
                    step.append(node[int(index)])
            elif filter_key is not None:
                for item in node if isinstance(node, list) else []:
                    found = json_path(item, "." + filter_key)
                    if found and str(found[0]) == filter_value:
                        step.append(item)
            elif isinstance(node, list):
                step += node
            elif isinstance(node, dict):
                step += list(node.values())
        nodes = step
        pos = match.end()
    return nodes


def parse_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def human_duration(seconds: float) -> str:
    """kubectl's ages: `42s`, `3m12s`, `25m`, `4h20m`, `30h`, `3d4h`, `12d`, `2y45d`."""
    s = max(0, int(seconds))
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 730:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d"


@dataclass(frozen=True, slots=True)
class Cell:
    """A built-in column: its definition and how to compute it from an object."""

    column: kinds.Column
    value: Callable[[dict, float], object]


def _age(obj: dict, now: float) -> str:
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    return human_duration(now - parse_time(stamp)) if stamp else "<unknown>"


def _path(path: str) -> Callable[[dict, float], object]:
    return lambda obj, now: _first(json_path(obj, path))


def _first(values: list[object]) -> object:
    return values[0] if values else None


def _pod_ready(pod: dict, now: float) -> str:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    total = len(pod.get("spec", {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _terminated_reason(state: dict, prefix: str = "") -> str:
    done = state["terminated"]
    if done.get("reason"):
        return prefix + done["reason"]
    return f"{prefix}Signal:{done['signal']}" if done.get("signal") else f"{prefix}ExitCode:{done.get('exitCode', 0)}"


def _pod_status(pod: dict, now: float) -> str:
    """kubectl's STATUS column (printPod): the first unfinished init container's, then the containers'."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status", {})
    inits = status.get("initContainerStatuses") or []
    for i, init in enumerate(inits):
        state = init.get("state") or {}
        if "terminated" in state and state["terminated"].get("exitCode", 0) == 0:
            continue
        if "terminated" in state:
            return _terminated_reason(state, "Init:")
        waiting = (state.get("waiting") or {}).get("reason")
        if waiting and waiting != "PodInitializing":
            return f"Init:{waiting}"
        return f"Init:{i}/{len(pod.get('spec', {}).get('initContainers') or inits)}"
    reason = status.get("reason") or status.get("phase", "Pending")
    for container in reversed(status.get("containerStatuses") or []):
        state = container.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            reason = _terminated_reason(state)
    return reason


def _restarts(pod: dict, now: float) -> int:
    status = pod.get("status", {})
    return sum(s.get("restartCount", 0) for s in [*(status.get("initContainerStatuses") or []),
                                                  *(status.get("containerStatuses") or [])])


def _ready_of(obj: dict, now: float) -> str:
    return f"{obj.get('status', {}).get('readyReplicas', 0)}/{obj.get('spec', {}).get('replicas', 0)}"


def _ports(svc: dict, now: float) -> str:
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in svc.get("spec", {}).get("ports") or [])


def _col(name: str, value: Callable[[dict, float], object], type_: str = "string", priority: int = 0) -> Cell:
    return Cell(kinds.Column(name, type_, "", priority), value)


_AGE = _col("Age", _age)
BUILTIN: dict[str, tuple[Cell, ...]] = {
    "/pods": (_col("Ready", _pod_ready), _col("Status", _pod_status), _col("Restarts", _restarts, "integer"), _AGE,
              _col("IP", _path(".status.podIP"), priority=1), _col("Node", _path(".spec.nodeName"), priority=1)),
    "apps/deployments": (_col("Ready", _ready_of), _col("Up-to-date", _path(".status.updatedReplicas"), "integer"),
                         _col("Available", _path(".status.availableReplicas"), "integer"), _AGE),
    "apps/replicasets": (_col("Desired", _path(".spec.replicas"), "integer"),
                         _col("Current", _path(".status.replicas"), "integer"),
                         _col("Ready", _path(".status.readyReplicas"), "integer"), _AGE),
    "/services": (_col("Type", _path(".spec.type")), _col("Cluster-IP", _path(".spec.clusterIP")),
                  _col("Port(s)", _ports), _AGE),
    "/namespaces": (_col("Status", _path(".status.phase")), _AGE),
    "/nodes": (_col("Status", lambda o, n: "Ready"), _AGE),
    "/events": (_col("Last Seen", lambda o, n: human_duration(n - parse_time(o["lastTimestamp"]))
                     if o.get("lastTimestamp") else "<unknown>"),
                _col("Type", _path(".type")), _col("Reason", _path(".reason")),
                _col("Object", lambda o, n: f"{o.get('involvedObject', {}).get('kind', '').lower()}/"
                                            f"{o.get('involvedObject', {}).get('name', '')}"),
                _col("Message", _path(".message"))),
}


def _format(value: object, column: kinds.Column, now: float) -> object:
    if value is None:
        return None
    if column.type == "date" and isinstance(value, str):
        return human_duration(now - parse_time(value))
    if column.type == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if column.type in ("string",) and not isinstance(value, str):
        return str(value).lower() if isinstance(value, bool) else deep.dumps(value).decode() \
            if isinstance(value, dict | list) else str(value)
    return value


def cells_for(rt: kinds.ResourceType) -> tuple[Cell, ...]:
    """The columns after NAME for `rt`."""
    if rt.key in BUILTIN:
        return BUILTIN[rt.key]
    if rt.columns:
        return tuple(Cell(c, _path(c.json_path)) for c in rt.columns)
    return (Cell(kinds.Column("Age", "date", ".metadata.creationTimestamp"), _path(".metadata.creationTimestamp")),)


def _partial(obj: dict) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def render(rt: kinds.ResourceType, objects: Sequence[dict], now: float, rv: str, include: str = "Metadata",
           headers: bool = True) -> dict:
    """A `Table` of `objects`; `include` is the `includeObject` query value (Metadata, None or Object)."""
    cells = cells_for(rt)
    rows = []
    for obj in objects:
        row: dict = {"cells": [obj.get("metadata", {}).get("name")]
                     + [_format(c.value(obj, now), c.column, now) for c in cells]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = _partial(obj)
        rows.append(row)
    table: dict = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv}, "rows": rows}
    if headers:
        name = {"name": "Name", "type": "string", "format": "name", "priority": 0,
                "description": "Name must be unique within a namespace."}
        table["columnDefinitions"] = [name] + [
            {"name": c.column.name, "type": "string" if c.column.type == "date" else c.column.type,
             "format": c.column.format, "priority": c.column.priority, "description": c.column.description}
            for c in cells]
    else:
        table["columnDefinitions"] = []
    return table
