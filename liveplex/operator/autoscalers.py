"""Which autoscalers target a LiveEngine, and which of them are someone else's (platform §12 item 4).

Two autoscalers on one scale subresource fight: each writes `spec.replicas` from its own view.
So the operator renders its own only when no other targets the LiveEngine, and removes its own
when one appears. Its own are the HPA or ScaledObject it owns (owner reference with the
LiveEngine's uid) and the HPA KEDA creates for its own ScaledObject. An object of a kind the
operator renders, named like the LiveEngine but not its own, counts as foreign too: applying
would overwrite it. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from liveplex.operator import names
from liveplex.operator.spec import LiveEngine

Json = Mapping[str, Any]


def _owners(obj: Json) -> Sequence[Json]:
    return obj.get("metadata", {}).get("ownerReferences", ())


def owned_by(obj: Json, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in _owners(obj))


def targets(obj: Json, le: LiveEngine) -> bool:
    """Whether `obj`'s `scaleTargetRef` names the LiveEngine (any version of its group)."""
    ref = obj.get("spec", {}).get("scaleTargetRef", {})
    group = str(ref.get("apiVersion", "")).partition("/")[0]
    return group == names.GROUP and ref.get("kind") == names.KIND and ref.get("name") == le.name


def foreign(le: LiveEngine, hpas: Sequence[Json], scaled_objects: Sequence[Json]) -> tuple[str, ...]:
    """`Kind/name` of every autoscaler in the LiveEngine's namespace that is in its way, sorted."""
    own_scaled = {so["metadata"]["name"] for so in scaled_objects if owned_by(so, le.uid)}
    out = []
    for (_, kind), objs in ((names.HPA, hpas), (names.SCALED_OBJECT, scaled_objects)):
        for obj in objs:
            name = obj["metadata"]["name"]
            keda_made = any(ref.get("kind") == names.SCALED_OBJECT[1] and ref.get("name") in own_scaled
                            for ref in _owners(obj))
            if owned_by(obj, le.uid) or keda_made:
                continue
            if targets(obj, le) or name == le.name:
                out.append(f"{kind}/{name}")
    return tuple(sorted(out))
