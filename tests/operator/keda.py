"""A strict JSON Schema of the KEDA ScaledObject fields the operator renders, written from KEDA's
ScaledObject specification and prometheus scaler pages (keda.sh/docs, v2.15+): kubernetes-validate
knows no KEDA types. `behavior` is checked separately as an HPA's (KEDA passes it through)."""

from __future__ import annotations

from typing import Any

import jsonschema

_STRING = {"type": "string", "minLength": 1}
_COUNT = {"type": "integer", "minimum": 0}


def _strict(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


SCALED_OBJECT = _strict({
    "apiVersion": {"const": "keda.sh/v1alpha1"},
    "kind": {"const": "ScaledObject"},
    "metadata": {"type": "object", "required": ["name", "namespace"]},
    "spec": _strict({
        "scaleTargetRef": _strict({"apiVersion": _STRING, "kind": _STRING, "name": _STRING,
                                   "envSourceContainerName": _STRING}, ("name",)),
        "pollingInterval": _COUNT,
        "cooldownPeriod": _COUNT,
        "initialCooldownPeriod": _COUNT,
        "idleReplicaCount": _COUNT,
        "minReplicaCount": _COUNT,
        "maxReplicaCount": _COUNT,
        "fallback": _strict({"failureThreshold": _COUNT, "replicas": _COUNT}, ("failureThreshold", "replicas")),
        "advanced": _strict({
            "restoreToOriginalReplicaCount": {"type": "boolean"},
            "horizontalPodAutoscalerConfig": _strict({"name": _STRING, "behavior": {"type": "object"}}),
        }),
        "triggers": {"type": "array", "minItems": 1, "items": _strict({
            "type": _STRING,
            "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
            "useCachedMetrics": {"type": "boolean"},
            "authenticationRef": _strict({"name": _STRING, "kind": _STRING}, ("name",)),
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        }, ("type", "metadata"))},
    }, ("scaleTargetRef", "triggers")),
}, ("apiVersion", "kind", "metadata", "spec"))

PROMETHEUS_METADATA = _strict({
    "serverAddress": {"type": "string", "pattern": "^https?://"},
    "query": _STRING,
    "threshold": {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?$"},
    "activationThreshold": {"type": "string"},
    "namespace": _STRING,
}, ("serverAddress", "query", "threshold"))
"""The prometheus scaler's metadata: `threshold` is a decimal string."""


def validate(obj: dict[str, Any]) -> None:
    jsonschema.validate(obj, SCALED_OBJECT)
    for trigger in obj["spec"]["triggers"]:
        if trigger["type"] == "prometheus":
            jsonschema.validate(trigger["metadata"], PROMETHEUS_METADATA)
