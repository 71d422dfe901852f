"""The kopf handlers, called directly as kopf calls them, against in-memory Kubernetes, load and routes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import kopf
import pytest

from liveplex.operator import KubeError, LoadFigures, Ref, deletion_cost, handlers, names
from liveplex.operator.metrics import OperatorMetrics
from liveplex.operator.settings import OperatorSettings
from tests.operator import objects
from tests.operator.fake import FakeEvents, FakeKubeClient, FakeLoads, FakeRoutes

LOG = logging.getLogger("test.operator")
NOW = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
SETTINGS = OperatorSettings(namespaces=("voice",), redis_url="redis://r:6379")
DEPLOYMENT = Ref("apps/v1", "Deployment", "voice", "pp")


def _ctx(client: FakeKubeClient, loads: FakeLoads | None = None, routes: FakeRoutes | None = None,
         settings: OperatorSettings = SETTINGS, events: FakeEvents | None = None) -> handlers.Context:
    return handlers.Context(settings=settings, client=client, loads=loads, routes=routes, clock=lambda: NOW,
                            events=events or FakeEvents())


async def _reconcile(ctx: handlers.Context, body: dict[str, Any]) -> kopf.Patch:
    patch = kopf.Patch()
    await handlers.reconcile(body=body, patch=patch, logger=LOG, memo=kopf.Memo(context=ctx))
    return patch


async def _roll_up(ctx: handlers.Context, body: dict[str, Any]) -> kopf.Patch:
    patch = kopf.Patch()
    await handlers.roll_up(body=body, patch=patch, logger=LOG, memo=kopf.Memo(context=ctx))
    return patch


def _pp(**spec: Any) -> dict[str, Any]:
    return objects.liveengine(objects.sim_spec(**spec))


async def test_reconcile_creates_the_owned_children_once() -> None:
    client = FakeKubeClient()
    ctx = _ctx(client)
    assert not await _reconcile(ctx, _pp())
    assert sorted(ref.kind for ref in client.objects) == ["Deployment", "PodDisruptionBudget", "Service"]
    for obj in client.objects.values():
        assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-pp"
    await _reconcile(ctx, _pp())
    assert len(client.writes) == 3


async def test_an_update_patches_the_deployment() -> None:
    client = FakeKubeClient()
    await _reconcile(_ctx(client), _pp())
    await _reconcile(_ctx(client), _pp(replicas=3, pod={"nodeSelector": {"pool": "cpu"}}))
    stored = client.objects[DEPLOYMENT]
    assert stored["spec"]["replicas"] == 3 and stored["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    await _reconcile(_ctx(client), _pp(replicas=3))
    assert "nodeSelector" not in client.objects[DEPLOYMENT]["spec"]["template"]["spec"]


async def test_an_invalid_spec_is_a_permanent_error_with_an_invalid_spec_condition() -> None:
    body = objects.liveengine({"engine": {"kind": "personaplex"}})
    patch = kopf.Patch()
    with pytest.raises(kopf.PermanentError, match="spec.model"):
        await handlers.reconcile(body=body, patch=patch, logger=LOG, memo=kopf.Memo(context=_ctx(FakeKubeClient())))
    ready = next(c for c in patch["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec") and "spec.model" in ready["message"]


async def test_a_transient_api_failure_is_retried_soon() -> None:
    class Unavailable(FakeKubeClient):
        async def get(self, ref: Ref):
            raise KubeError(503, "etcd leader changed")

    with pytest.raises(kopf.TemporaryError):
        await _reconcile(_ctx(Unavailable()), _pp())


class Refusing(FakeKubeClient):
    """An API server that refuses the Deployment, as a real one refuses invalid pod labels."""

    refuse = True

    async def create(self, obj):
        if self.refuse and obj["kind"] == "Deployment":
            raise KubeError(422, 'Deployment.apps "pp" is invalid: spec.template.metadata.labels: Invalid value')
        return await super().create(obj)


async def test_a_refused_child_is_in_the_status_and_retried_with_a_growing_back_off() -> None:
    client = Refusing()
    ctx = _ctx(client)
    delays = []
    for retry in range(8):
        patch = kopf.Patch()
        with pytest.raises(kopf.TemporaryError) as caught:
            await handlers.reconcile(body=_pp(), patch=patch, logger=LOG, memo=kopf.Memo(context=ctx), retry=retry)
        delays.append(caught.value.delay)
    assert delays == [10, 20, 40, 80, 160, 320, 600, 600]
    ready = patch["status"]["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "ChildRefused")
    assert 'Deployment.apps "pp" is invalid: spec.template.metadata.labels' in ready["message"]
    refused = _pp()
    refused["status"] = dict(patch["status"])
    assert "status" not in await _roll_up(ctx, refused)  # the roll-up keeps the refusal: nothing to write
    client.refuse = False
    cleared = await _reconcile(ctx, refused)
    assert cleared["status"]["conditions"][0]["reason"] != "ChildRefused"


async def _serving(client: FakeKubeClient) -> None:
    await _reconcile(_ctx(client), _pp(replicas=2))
    client.objects[DEPLOYMENT]["status"] = objects.deployment(replicas=2, ready=2)["status"]
    for name in ("pp-a", "pp-b"):
        client.put(objects.pod(name, ready=True, started=True))


async def test_the_timer_writes_status_and_then_nothing_while_nothing_changes() -> None:
    client = FakeKubeClient()
    await _serving(client)
    loads = FakeLoads({"voice/pp": LoadFigures(active=3, capacity=64, emptiest={"pp-a": 2, "pp-b": 1})})
    ctx = _ctx(client, loads, FakeRoutes())
    first = await _roll_up(ctx, _pp(replicas=2))
    status = first["status"]
    assert status["sessions"] == {"active": 3, "reserved": 0, "capacity": 64} and status["phase"] == "Ready"
    assert not await _roll_up(ctx, _pp(replicas=2) | {"status": dict(status)})


async def test_the_timer_marks_the_emptiest_pod_and_writes_only_changes() -> None:
    client = FakeKubeClient()
    await _serving(client)
    loads = FakeLoads({"voice/pp": LoadFigures(active=3, capacity=64, emptiest={"pp-a": 2, "pp-b": 1})})
    ctx = _ctx(client, loads)
    await _roll_up(ctx, _pp(replicas=2))
    costs = {ref.name: o["metadata"]["annotations"].get(names.DELETION_COST)
             for ref, o in client.objects.items() if ref.kind == "Pod"}
    assert costs == {"pp-a": None, "pp-b": str(1 - deletion_cost.OFFSET)}, "of two pods, one is the candidate"
    writes = len(client.writes)
    await _roll_up(ctx, _pp(replicas=2))
    assert len(client.writes) == writes
    loads.loads["voice/pp"] = LoadFigures(active=2, capacity=64, emptiest={"pp-a": 0, "pp-b": 2})
    await _roll_up(ctx, _pp(replicas=2))
    assert len(client.writes) == writes + 2
    annotations = {ref.name: o["metadata"]["annotations"] for ref, o in client.objects.items() if ref.kind == "Pod"}
    assert annotations["pp-a"][names.DELETION_COST] == str(-deletion_cost.OFFSET)
    assert names.DELETION_COST not in annotations["pp-b"]


async def test_deletion_cost_patches_stay_within_the_operator_wide_budget() -> None:
    client = FakeKubeClient()
    await _serving(client)
    loads = FakeLoads({"voice/pp": LoadFigures(active=0, capacity=64, emptiest={"pp-a": 2, "pp-b": 1})})
    ctx = handlers.Context(settings=SETTINGS, client=client, loads=loads, clock=lambda: NOW, events=FakeEvents(),
                           deletion_budget=deletion_cost.Budget(rate_per_s=1, burst=1))
    for pod in ("pp-a", "pp-b"):  # a stale mark to remove (pp-a) and one to rewrite (pp-b): two patches wanted
        client.objects[Ref("v1", "Pod", "voice", pod)]["metadata"]["annotations"][names.DELETION_COST] = "9"
    await _roll_up(ctx, _pp(replicas=2))
    patched = [ref.name for kind, ref, _ in client.writes if ref.kind == "Pod"]
    assert patched == ["pp-a"], "one patch a second, the stale mark of a non-candidate first"


async def test_routes_are_resolved_once_per_interval_for_every_live_engine() -> None:
    client = FakeKubeClient()
    bodies = [client.put(objects.liveengine(objects.sim_spec(model={"name": "m", "servedModels": [f"m{i}"]}),
                                            name=f"pp{i}")) for i in range(5)]
    lists = 0
    listing = client.list

    async def counted(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        nonlocal lists
        lists += args[1] == names.KIND
        return await listing(*args, **kwargs)

    client.list = counted  # type: ignore[method-assign]
    routes = FakeRoutes()
    ctx = _ctx(client, FakeLoads(), routes)
    for body in bodies:
        await _roll_up(ctx, body)
    assert lists == 1 and routes.writes == 1 and len(routes.routes) == 6  # m0..m4, and m (the oldest's name)


async def test_the_timer_routes_models_and_the_younger_claimant_gets_route_conflict() -> None:
    client = FakeKubeClient()
    old = client.put(objects.liveengine(objects.sim_spec(model={"name": "m", "servedModels": ["gpt-live-1", "a"]}),
                                        name="pp", created="2026-01-01T00:00:00Z"))
    young = client.put(objects.liveengine(objects.sim_spec(model={"name": "m", "servedModels": ["gpt-live-1"]}),
                                          name="pp2", created="2026-02-01T00:00:00Z"))
    routes = FakeRoutes({"stale": "voice/deleted", "lab-model": "lab/sim"})
    ctx = _ctx(client, FakeLoads(), routes)
    old_status = (await _roll_up(ctx, old))["status"]
    young_status = (await _roll_up(ctx, young))["status"]
    assert routes.routes == {"m": "voice/pp", "gpt-live-1": "voice/pp", "a": "voice/pp", "lab-model": "lab/sim"}
    assert routes.writes == 1
    ready = {s["selector"]: next(c for c in s["conditions"] if c["type"] == "Ready")
             for s in (old_status, young_status)}
    assert ready[names.selector_text("pp2")]["reason"] == "RouteConflict"
    assert ready[names.selector_text("pp2")]["message"] == "an older LiveEngine serves gpt-live-1"  # not its name
    assert ready[names.selector_text("pp")]["reason"] != "RouteConflict"


async def test_each_condition_change_is_one_event_and_a_steady_state_posts_none() -> None:
    client = FakeKubeClient()
    await _serving(client)
    loads = FakeLoads({"voice/pp": LoadFigures(active=3, capacity=64, emptiest={"pp-a": 2, "pp-b": 1})})
    events = FakeEvents()
    ctx = _ctx(client, loads, events=events)
    status = (await _roll_up(ctx, _pp(replicas=2)))["status"]
    assert events.posted == [("pp", "Normal", "AllReplicasReady", "Ready=True: 2/2 replicas ready")]
    loads.loads["voice/pp"] = LoadFigures(active=5, capacity=64, emptiest={"pp-a": 3, "pp-b": 2})
    status = (await _roll_up(ctx, _pp(replicas=2) | {"status": status}))["status"]  # new figures, same conditions
    assert len(events.posted) == 1
    loads.loads["voice/pp"] = LoadFigures(active=64, capacity=64, emptiest={"pp-a": 32, "pp-b": 32})
    status = (await _roll_up(ctx, _pp(replicas=2) | {"status": status}))["status"]
    assert events.posted[1:] == [("pp", "Warning", "AllSlotsInUse", "CapacityExhausted=True: every slot is in use")]
    assert not await _roll_up(ctx, _pp(replicas=2) | {"status": status}) and len(events.posted) == 2


async def test_an_invalid_spec_is_a_warning_event() -> None:
    events = FakeEvents()
    with pytest.raises(kopf.PermanentError):
        await _reconcile(_ctx(FakeKubeClient(), events=events), objects.liveengine({"engine": {"kind": "personaplex"}}))
    [(name, kind, reason, note)] = events.posted
    assert (name, kind, reason) == ("pp", "Warning", "InvalidSpec") and note.startswith("Ready=False: spec.model")


async def test_redis_down_keeps_the_roll_up_going_without_figures() -> None:
    client = FakeKubeClient()
    await _serving(client)

    class Down(FakeRoutes):
        async def read(self):
            raise ConnectionError("redis down")

    ctx = _ctx(client, FakeLoads({"voice/pp": ConnectionError("redis down")}), Down())
    status = (await _roll_up(ctx, _pp(replicas=2)))["status"]
    assert status["readyReplicas"] == 2 and status["sessions"] == {"active": 0, "reserved": 0, "capacity": 0}
    assert all(names.DELETION_COST not in o["metadata"].get("annotations", {})
               for ref, o in client.objects.items() if ref.kind == "Pod")


def test_the_registry_holds_one_reconcile_for_three_causes_the_timer_and_no_finalizer() -> None:
    registry = handlers.build_registry(10.0, OperatorMetrics())
    changing = registry._changing.get_all_handlers()
    assert sorted(h.reason or ("resume" if h.initial else "?") for h in changing) == ["create", "resume", "update"]
    assert {h.fn.__wrapped__ for h in changing} == {handlers.reconcile}  # type: ignore[attr-defined]
    assert not any(h.requires_finalizer for h in changing)
    (timer,) = registry._spawning.get_all_handlers()
    assert timer.fn.__wrapped__ is handlers.roll_up and timer.interval == 10.0  # type: ignore[attr-defined]


def test_kopf_keeps_its_bookkeeping_out_of_the_status() -> None:
    s = kopf.OperatorSettings()
    handlers.configure(settings=s)
    assert isinstance(s.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(s.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert s.posting.reporting_component == "liveplex-operator"
