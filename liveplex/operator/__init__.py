"""The LiveEngine operator: CRD, renderers, status roll-up, routes and the kopf handlers.

Pure modules: `names`, `cel`, `crd`, `schema`, `spec`, `render`, `signals`, `autoscalers`, `status`,
`routes`, `deletion_cost`, `pool` (interfaces). Edges: `apply` (create-or-patch over `KubeClient`),
`kube` (the official client), `handlers` (kopf), `cli`. Never imports engine code; importing
this package loads neither kopf nor kubernetes. See docs/operator.md.
"""

from liveplex.operator.apply import Conflict, KubeClient, KubeError, Ref, create_or_patch
from liveplex.operator.crd import render_crd
from liveplex.operator.deletion_cost import deletion_costs
from liveplex.operator.pool import LoadFigures, LoadReader, RouteStore
from liveplex.operator.render import (
    render_autoscaler,
    render_children,
    render_deployment,
    render_hpa,
    render_pdb,
    render_scaledobject,
    render_service,
    serve_args,
)
from liveplex.operator.routes import Claim, Resolution, resolve
from liveplex.operator.settings import OperatorSettings, SecretKey
from liveplex.operator.spec import EngineSpec, LiveEngine, SpecError, parse
from liveplex.operator.status import Reason, compute_status

__all__ = [
    "Claim", "Conflict", "EngineSpec", "KubeClient", "KubeError", "LiveEngine", "LoadReader", "OperatorSettings",
    "LoadFigures", "Reason", "Ref", "Resolution", "RouteStore", "SecretKey", "SpecError", "compute_status",
    "create_or_patch", "deletion_costs", "parse", "render_autoscaler", "render_children", "render_crd",
    "render_deployment", "render_hpa", "render_pdb", "render_scaledobject", "render_service", "resolve", "serve_args",
]
