"""The LiveEngine's cross-field rules: CEL text for the CRD and its Python twin, written once.

`crd.render_crd` attaches each rule's `rule` and `message` as an `x-kubernetes-validations` entry at
the schema node `at`; `schema.check` runs `holds` on the same node after defaulting, so the
operator refuses exactly what an API server with CEL would have refused (the emulator, and
objects written before a CRD upgrade, have no admission). Each rule says which field it blames,
so `SpecError` names it. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from liveplex.live import frames
from liveplex.operator import names

Node = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Rule:
    """One `x-kubernetes-validations` entry and its Python equivalent."""

    at: tuple[str, ...]
    """Schema node the rule sits on, from the object root (`("spec", "capacity")`)."""
    rule: str
    """CEL, evaluated by the API server with `self` = the node."""
    message: str
    """What the API server answers; names the field."""
    blames: tuple[str, ...]
    """The field the message is about, from the object root: the `SpecError` path."""
    holds: Callable[[Any], bool]
    """The Python equivalent on the defaulted node (an object, a list or a scalar)."""


def _kind(spec: Node) -> str:
    return spec["engine"]["kind"]


def _gpus(spec: Node) -> int | None:
    return spec.get("resources", {}).get("gpus")


def _has_source(spec: Node) -> bool:
    return "source" in spec.get("model", {})


def _matches(pattern: str, text: str) -> bool:
    """CEL `matches`: an unanchored search (the patterns here anchor themselves)."""
    return re.search(pattern, text) is not None


_SOURCES = ("pvc", "hostPath", "image", "fetch")
_DNS_LABEL = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
_RESERVED_ENV_CEL = "[" + ", ".join(f"'{n}'" for n in names.RESERVED_ENV) + "]"

RULES: tuple[Rule, ...] = (
    Rule((), f"size(self.metadata.name) <= 63 && self.metadata.name.matches('{_DNS_LABEL}')",
         "metadata.name must be a DNS-1035 label of at most 63 characters: it names the Service",
         ("metadata", "name"),
         lambda o: len(o["metadata"]["name"]) <= 63 and _matches(_DNS_LABEL, o["metadata"]["name"])),
    Rule(("spec",), "self.engine.kind != 'personaplex' || has(self.model)",
         "spec.model is required when spec.engine.kind is personaplex",
         ("spec", "model"),
         lambda s: _kind(s) != "personaplex" or "model" in s),
    Rule(("spec",), "self.engine.kind != 'personaplex' || !has(self.model) || has(self.model.source)",
         "spec.model.source is required when spec.engine.kind is personaplex",
         ("spec", "model", "source"),
         lambda s: _kind(s) != "personaplex" or "model" not in s or _has_source(s)),
    Rule(("spec",), "self.engine.kind == 'personaplex' || !has(self.model) || !has(self.model.source)",
         "spec.model.source is only used by personaplex engines",
         ("spec", "model", "source"),
         lambda s: _kind(s) == "personaplex" or not _has_source(s)),
    Rule(("spec",),
         "self.engine.kind != 'sim' || !has(self.resources) || !has(self.resources.gpus) || self.resources.gpus == 0",
         "spec.resources.gpus must be 0 for engine.kind sim: the sim runs on the CPU",
         ("spec", "resources", "gpus"),
         lambda s: _kind(s) != "sim" or _gpus(s) in (None, 0)),
    Rule(("spec",),
         "self.engine.kind != 'personaplex' || !has(self.resources) || !has(self.resources.gpus) "
         "|| self.resources.gpus == 1",
         "spec.resources.gpus must be 1 for engine.kind personaplex: the engine runs on one GPU",
         ("spec", "resources", "gpus"),
         lambda s: _kind(s) != "personaplex" or _gpus(s) in (None, 1)),
    Rule(("spec",),
         "!has(self.placement) || !has(self.placement.subPools) || self.placement.subPools == 1 || has(self.model)",
         "spec.placement.subPools over 1 needs spec.model: gateways learn the count from the model's route",
         ("spec", "placement", "subPools"),
         lambda s: s.get("placement", {}).get("subPools", 1) == 1 or "model" in s),
    Rule(("spec", "engine"), "!has(self.sim) || self.kind == 'sim'",
         "spec.engine.sim is allowed only when spec.engine.kind is sim",
         ("spec", "engine", "sim"),
         lambda e: "sim" not in e or e["kind"] == "sim"),
    Rule(("spec", "model"), "!has(self.kvDtype) || self.kvDtype == self.dtype || self.kvDtype == 'fp8'",
         "spec.model.kvDtype must equal spec.model.dtype or be fp8: the engine keeps its KV ring in the "
         "weights' dtype or in e4m3",
         ("spec", "model", "kvDtype"),
         lambda m: "kvDtype" not in m or m["kvDtype"] in (m["dtype"], "fp8")),
    Rule(("spec", "model", "source"),
         " + ".join(f"(has(self.{k}) ? 1 : 0)" for k in _SOURCES) + " == 1",
         "spec.model.source must set exactly one of pvc, hostPath, image, fetch",
         ("spec", "model", "source"),
         lambda src: sum(k in src for k in _SOURCES) == 1),
    Rule(("spec", "pacing"), f"self.leadMillis + self.spreadMillis < {frames.FRAME_MS}",
         f"spec.pacing.leadMillis + spec.pacing.spreadMillis must be under one tick ({frames.FRAME_MS} ms)",
         ("spec", "pacing", "spreadMillis"),
         lambda p: p["leadMillis"] + p["spreadMillis"] < frames.FRAME_MS),
    Rule(("spec", "capacity"), "self.prebufferFrames <= self.jitterFrames",
         "spec.capacity.prebufferFrames must not exceed spec.capacity.jitterFrames",
         ("spec", "capacity", "prebufferFrames"),
         lambda c: c["prebufferFrames"] <= c["jitterFrames"]),
    Rule(("spec", "pause"), "self.idleSeconds == 0 || self.maxPaused > 0",
         "spec.pause.maxPaused must be above 0 when spec.pause.idleSeconds is: a pod that may hold no paused "
         "session never pauses one",
         ("spec", "pause", "maxPaused"),
         lambda p: p["idleSeconds"] == 0 or p["maxPaused"] > 0),
    Rule(("spec", "autoscaling"), "self.minReplicas <= self.maxReplicas",
         "spec.autoscaling.minReplicas must not exceed spec.autoscaling.maxReplicas",
         ("spec", "autoscaling", "minReplicas"),
         lambda a: a["minReplicas"] <= a["maxReplicas"]),
    Rule(("spec", "pod", "labels"),
         " && ".join(f"!('{k}' in self)" for k in names.SELECTOR_KEYS),
         f"spec.pod.labels must not set {' or '.join(names.SELECTOR_KEYS)}: the operator's selector owns them",
         ("spec", "pod", "labels"),
         lambda labels: not any(k in labels for k in names.SELECTOR_KEYS)),
    Rule(("spec", "pod", "env"), f"self.all(e, !(e.name in {_RESERVED_ENV_CEL}))",
         f"spec.pod.env must not set {', '.join(names.RESERVED_ENV)}: the operator sets them",
         ("spec", "pod", "env"),
         lambda env: not any(e["name"] in names.RESERVED_ENV for e in env)),
)
