"""The kopf handlers: one level-based reconcile and the status timer (platform §4).

`reconcile` runs on create, update and resume alike: it renders the children from the spec and
applies each with `apply.create_or_patch`, so a replay or a retry does nothing new. `roll_up` runs every
`status_interval_s`: it reads the Deployment, its pods and the pool's load (totals and its emptiest
pods, O(K) of Redis), takes the `le:routes` resolution made once per interval for every LiveEngine
(`interval.PerInterval`: the first timer of an interval resolves, the others reuse it), and writes
the status only when it changed, plus the deletion cost of the few pods a scale-down would pick
(`deletion_cost`), under an operator-wide write budget.
Both return None and write `patch.status` explicitly, each condition that changed posted as a
Kubernetes Event (`kubectl describe le`) and logged. Everything they talk to comes from the
`Context` in kopf's memo, so tests call them directly with in-memory parts.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import kopf

from liveplex.operator import apply, autoscalers, deletion_cost, interval, names, render, routes, spec, status
from liveplex.operator.metrics import OperatorMetrics, instrumented
from liveplex.operator.pool import LoadFigures, LoadReader, RouteStore
from liveplex.operator.settings import OperatorSettings

RETRY_DELAY_S = 10.0
"""Delay before retrying after a transient API failure, and the first one after a refused child."""
REFUSED_MAX_DELAY_S = 600.0
"""A refused child (422, 403, 400) is retried with a doubling delay up to this: only a change of the
LiveEngine, the cluster's rules or the operator's rights can make the same apply succeed."""
REFUSALS = (400, 403, 422)
DELETION_COST_WRITES_PER_S = 20.0
"""The most pod-deletion-cost patches a second, all pools together (and at once)."""
RESOURCE = (names.GROUP, names.VERSION, names.PLURAL)

logger = logging.getLogger(__name__)
"""The operator's own lines, each naming its `liveengine`: kopf's logger is for kopf's (routine at info,
`logs.ROUTINE`)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def post_event(body: Mapping[str, Any], change: status.Transition) -> None:
    """kopf's Events poster: queued, posted in the background with kopf's retries, so a handler never
    waits on it (it needs the context kopf gives a handler)."""
    kopf.event(cast(kopf.Body, body),  # kopf reads its apiVersion, kind and metadata: any mapping does
               type=change.event_type, reason=change.reason, message=change.note)


@dataclass(frozen=True, slots=True)
class Context:
    """What the handlers act through; kept in kopf's memo under `context`."""

    settings: OperatorSettings
    client: apply.KubeClient
    loads: LoadReader | None = None
    """Pool load from Redis; None: the status carries no session or tick figures."""
    routes: RouteStore | None = None
    """`le:routes`; None: routes are resolved for RouteConflict but not written."""
    clock: Callable[[], datetime] = field(default=_utc_now)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    """Handler runs and LiveEngine phases, read by `/metrics`."""
    resolved: interval.PerInterval[routes.Resolution] | None = None
    """The routes resolved once per status interval for every LiveEngine (made from the settings)."""
    deletion_budget: deletion_cost.Budget = field(
        default_factory=lambda: deletion_cost.Budget(DELETION_COST_WRITES_PER_S, DELETION_COST_WRITES_PER_S))
    """pod-deletion-cost patches, operator-wide."""
    events: Callable[[Mapping[str, Any], status.Transition], None] = field(default=post_event)
    """Where a LiveEngine's condition changes go as Kubernetes Events."""

    def __post_init__(self) -> None:
        if self.resolved is None:
            object.__setattr__(self, "resolved", interval.PerInterval(self.settings.status_interval_s))


def _context(memo: Mapping[str, Any]) -> Context:
    return memo["context"]


def _transient(exc: apply.KubeError) -> kopf.TemporaryError:
    return kopf.TemporaryError(f"Kubernetes API: {exc}", delay=RETRY_DELAY_S)


def refused_delay(retry: int) -> float:
    """The back-off after the `retry`-th refusal in a row (kopf counts the retries)."""
    return min(RETRY_DELAY_S * 2 ** min(retry, 16), REFUSED_MAX_DELAY_S)


async def reconcile(body: Mapping[str, Any], patch: kopf.Patch, memo: Mapping[str, Any], retry: int = 0,
                    **_: Any) -> None:
    """Render and apply the children; an unrenderable spec is reported and not retried, a child the
    API server refuses is reported in the status and retried with a growing back-off."""
    ctx = _context(memo)
    try:
        le = spec.parse(body)
    except spec.SpecError as exc:
        deployment, pods = await _observe(ctx, body)
        _write_status(ctx, body, patch, status.compute_status(body, deployment, pods, None, ctx.clock()))
        raise kopf.PermanentError(f"invalid spec: {exc}") from exc
    try:
        for child in render.render_children(le, ctx.settings):
            await apply.create_or_patch(ctx.client, child)
        await _sync_autoscaler(ctx, le)
    except apply.KubeError as exc:
        if exc.transient:
            raise _transient(exc) from exc
        if exc.status not in REFUSALS:
            raise
        refused = f"the API server refused a child: {exc}"
        deployment, pods = await _observe(ctx, body)
        _write_status(ctx, body, patch, status.compute_status(body, deployment, pods, None, ctx.clock(),
                                                              refused=refused))
        delay = refused_delay(retry)
        logger.warning("child refused", extra={"liveengine": le.pool, "error": str(exc), "retry_in_s": delay})
        raise kopf.TemporaryError(refused, delay=delay) from exc
    if status.refusal(body) is not None:  # applied now: the roll-up may report the children again
        deployment, pods = await _observe(ctx, body)
        _write_status(ctx, body, patch, status.compute_status(body, deployment, pods, None, ctx.clock()))
    logger.info("children applied", extra={"liveengine": le.pool, "generation": le.generation})


async def roll_up(body: Mapping[str, Any], patch: kopf.Patch, memo: Mapping[str, Any], **_: Any) -> None:
    """The status timer: observe, compute, and write only what changed."""
    ctx = _context(memo)
    meta = body["metadata"]
    pool = names.pool(meta["namespace"], meta["name"])
    try:
        le = spec.parse(body)
    except spec.SpecError:
        le = None  # the reconcile reported it; no autoscaler is kept or made for it
    try:
        deployment, pods = await _observe(ctx, body)
        conflicts = await _sync_routes(ctx, pool)
        foreign = await _sync_autoscaler(ctx, le) if le is not None else ()
    except apply.KubeError as exc:
        if exc.transient:
            raise _transient(exc) from exc
        raise
    load = await _load(ctx, pool, le.spec.sub_pools if le is not None else 1)
    _write_status(ctx, body, patch, status.compute_status(
        body, deployment, pods, load, ctx.clock(), conflicts=conflicts, foreign_autoscalers=foreign,
        refused=status.refusal(body)))
    if load is not None:
        changes = deletion_cost.deletion_costs(pods, load.emptiest)
        for pod, cost in changes[:ctx.deletion_budget.take(ctx.clock().timestamp(), len(changes))]:
            try:
                await ctx.client.patch(apply.Ref("v1", "Pod", meta["namespace"], pod),
                                       {"metadata": {"annotations": {names.DELETION_COST: cost}}})
            except apply.KubeError as exc:  # a hint only: the pod may be gone; the next roll-up retries
                logger.warning("pod-deletion-cost not written",
                               extra={"liveengine": pool, "pod": pod, "error": str(exc)})


def _write_status(ctx: Context, body: Mapping[str, Any], patch: kopf.Patch, new: Mapping[str, Any]) -> None:
    """Patch the status if it changed; each condition that changed is an Event and a log line (a
    warning for a reason a user may have to act on)."""
    before = body.get("status") or {}
    if all(before.get(key) == value for key, value in new.items()):
        return
    patch.status.update(new)
    for change in status.transitions(before, new):
        ctx.events(body, change)
        logger.log(logging.WARNING if change.warning else logging.INFO, "condition changed",
                   extra={"liveengine": names.pool(body["metadata"]["namespace"], body["metadata"]["name"]),
                          "condition": change.condition, "status": change.status, "reason": change.reason,
                          "detail": change.message})


async def _observe(ctx: Context, body: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    meta = body["metadata"]
    deployment = await ctx.client.get(apply.Ref("apps/v1", "Deployment", meta["namespace"], meta["name"]))
    pods = await ctx.client.list("v1", "Pod", meta["namespace"], names.selector(meta["name"]))
    return deployment, pods


async def _sync_autoscaler(ctx: Context, le: spec.LiveEngine) -> tuple[str, ...]:
    """Apply the autoscaler the spec asks for unless another targets the LiveEngine; remove the
    operator's own otherwise (and the other provider's after a switch). Returns the foreign ones."""
    wanted = render.render_autoscaler(le, ctx.settings)
    foreign: tuple[str, ...] = ()
    if wanted is not None:
        hpas = await ctx.client.list(*names.HPA, le.namespace)
        foreign = autoscalers.foreign(le, hpas, await _served_list(ctx, names.SCALED_OBJECT, le.namespace))
    keep = apply.Ref.of(wanted) if wanted is not None and not foreign else None
    for api_version, kind in (names.HPA, names.SCALED_OBJECT):
        ref = apply.Ref(api_version, kind, le.namespace, le.name)
        if ref != keep:
            current = await ctx.client.get(ref)
            if current is not None and autoscalers.owned_by(current, le.uid):
                await ctx.client.delete(ref)
                logger.info("autoscaler removed", extra={"liveengine": le.pool, "kind": kind})
    if foreign:
        logger.warning("another autoscaler targets this LiveEngine", extra={"liveengine": le.pool, "foreign": foreign})
    if keep is not None:
        assert wanted is not None
        await apply.create_or_patch(ctx.client, wanted)
    return foreign


async def _served_list(ctx: Context, kind: tuple[str, str], namespace: str) -> list[dict[str, Any]]:
    """The kind's objects; none when the cluster does not serve the kind (KEDA not installed)."""
    try:
        return await ctx.client.list(*kind, namespace)
    except apply.KubeError as exc:
        if exc.status == 404:
            return []
        raise


async def _load(ctx: Context, pool: str, count: int) -> LoadFigures | None:
    if ctx.loads is None:
        return None
    try:
        return await ctx.loads.read(pool, count)
    except Exception as exc:  # Redis down must not stop the roll-up: the figures are kept instead
        logger.warning("pool load unavailable", extra={"liveengine": pool, "error": repr(exc)}, exc_info=True)
        return None


async def _sync_routes(ctx: Context, pool: str) -> Sequence[str]:
    """This pool's lost names, from the routes resolved once per interval for every LiveEngine."""
    assert ctx.resolved is not None
    resolution = await ctx.resolved.get(ctx.clock().timestamp(), lambda: _resolve_routes(ctx))
    return resolution.lost.get(pool, ())


async def _resolve_routes(ctx: Context) -> routes.Resolution:
    """Resolve le:routes over every LiveEngine in scope and write the changes."""
    scope = ctx.settings.namespaces
    bodies = [b for ns in (scope or (None,)) for b in await ctx.client.list(names.API_VERSION, names.KIND, ns)]
    claims = []
    for b in bodies:
        try:
            le = spec.parse(b)
        except spec.SpecError:
            continue  # an invalid LiveEngine claims nothing
        if (model := le.spec.model) is not None:
            claims.append(routes.Claim(le.pool, le.created, model.served_models, le.spec.sub_pools, model.name))
    current: Mapping[str, str] = {}
    if ctx.routes is not None:
        try:
            current = await ctx.routes.read()
        except Exception as exc:  # still resolve among the claims we can see
            logger.warning("routes unavailable", extra={"error": repr(exc)}, exc_info=True)
    resolution = routes.resolve(claims, current, scope)
    changes = routes.changes(current, resolution, scope)
    if ctx.routes is not None and changes:
        try:
            await ctx.routes.write(changes.set_, changes.delete)
        except Exception as exc:
            logger.warning("routes not written", extra={"error": repr(exc)}, exc_info=True)
    return resolution


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Keep kopf's bookkeeping in annotations: the status schema would prune `status.kopf`. Events
    come from the operator and this replica (its pod's name), not from kopf's `dev`."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=names.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=names.GROUP)
    settings.posting.reporting_component = names.OPERATOR
    settings.posting.reporting_instance = socket.gethostname()


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """A fresh registry has none of kopf's default login handlers: the pod's service account in a
    cluster, else the kubeconfig (`KUBECONFIG`), read by kopf itself."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


def build_registry(interval_s: float, metrics: OperatorMetrics) -> kopf.OperatorRegistry:
    """A fresh registry with the handlers (no import-time registration on kopf's default one),
    each counted and timed in `metrics`."""
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(login)
    kopf.on.startup(registry=registry)(configure)
    counted = instrumented(metrics, "reconcile", reconcile)
    for cause in (kopf.on.create, kopf.on.update, kopf.on.resume):
        cause(*RESOURCE, id="reconcile", registry=registry)(counted)
    kopf.timer(*RESOURCE, id="status", interval=interval_s, registry=registry)(instrumented(metrics, "status", roll_up))
    return registry


async def operate(ctx: Context, *, stop_flag: Any = None, ready_flag: Any = None) -> None:
    """Run the operator until `stop_flag` (an asyncio.Event or Future) is set or the task is cancelled."""
    s = ctx.settings
    await kopf.operator(
        registry=build_registry(s.status_interval_s, ctx.metrics), memo=kopf.Memo(context=ctx), standalone=True,
        clusterwide=s.clusterwide, namespaces=list(s.namespaces), liveness_endpoint=s.liveness_endpoint,
        stop_flag=stop_flag, ready_flag=ready_flag,
    )
