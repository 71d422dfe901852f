"""Kubernetes' own schemas (kubernetes-validate, strict) and the CRD's schema as strict JSON Schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate import utils as kv_utils

VERSIONS = sorted({kv_utils.major_minor(v) for v in kv_utils.all_versions()}, key=lambda v: int(v.split(".")[1]))
LOWEST, NEWEST = VERSIONS[0], VERSIONS[-1]
"""The supported range: the oldest and newest Kubernetes minors kubernetes-validate ships."""


def validate_strict(obj: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


def strict_json_schema(node: Any) -> Any:
    """The CRD's structural schema as Draft 2020-12 with Kubernetes' meanings made explicit:
    unknown fields refused (pruning + strict field validation), list-type set -> uniqueItems."""
    if isinstance(node, list):
        return [strict_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(strict_json_schema(schema))
