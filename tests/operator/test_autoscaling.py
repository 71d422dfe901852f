"""`spec.autoscaling` rendered: the HPA and the ScaledObject, their goldens and schemas, and the
handlers applying one, switching, removing and refusing when another autoscaler targets the LiveEngine."""

from __future__ import annotations

import copy
import logging
from typing import Any

import jsonschema
import kopf
import pytest

from liveplex.operator import Ref, autoscalers, handlers, names, render, signals, spec
from liveplex.operator.settings import OperatorSettings
from tests.operator import golden, keda, kubeschemas, objects
from tests.operator.fake import FakeEvents, FakeKubeClient

LOG = logging.getLogger("test.operator")
SETTINGS = OperatorSettings(namespaces=("voice",), redis_url="redis://r:6379", prometheus_url="http://prom:9090")
HPA = Ref(*names.HPA, "voice", "pp")
SCALED = Ref(*names.SCALED_OBJECT, "voice", "pp")


def _le(provider: str = "hpa", enabled: bool = True, **autoscaling: Any) -> dict[str, Any]:
    return objects.liveengine(objects.sim_spec(
        capacity={"maxSessions": 32}, autoscaling={"enabled": enabled, "provider": provider, "maxReplicas": 6,
                                                   **autoscaling}))


def _rendered(provider: str, **autoscaling: Any) -> dict[str, Any]:
    obj = render.render_autoscaler(spec.parse(_le(provider, **autoscaling)), SETTINGS)
    assert obj is not None
    return obj


@pytest.mark.parametrize("provider", ["hpa", "keda"])
def test_the_autoscaler_equals_its_golden_file(provider: str) -> None:
    golden.assert_golden(f"autoscaler-{provider}", _rendered(provider))


def test_the_hpa_validates_strictly_at_the_lowest_and_newest_minor() -> None:
    for version in (kubeschemas.LOWEST, kubeschemas.NEWEST):
        kubeschemas.validate_strict(_rendered("hpa"), version)


def test_a_misspelt_hpa_field_is_refused_by_the_strict_schema() -> None:
    hpa = _rendered("hpa")
    hpa["spec"]["behavior"]["scaleDown"]["stabilisationWindowSeconds"] = 5
    with pytest.raises(Exception, match="stabilisationWindowSeconds"):
        kubeschemas.validate_strict(hpa, kubeschemas.NEWEST)


def test_the_scaledobject_matches_kedas_schema_and_its_behavior_is_an_hpas() -> None:
    so = _rendered("keda")
    keda.validate(so)
    as_hpa = copy.deepcopy(_rendered("hpa"))
    as_hpa["spec"]["behavior"] = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    kubeschemas.validate_strict(as_hpa, kubeschemas.NEWEST)
    broken = copy.deepcopy(so)
    broken["spec"]["triggers"][0]["metadata"]["threshold"] = 22.4
    with pytest.raises(jsonschema.ValidationError):
        keda.validate(broken)


@pytest.mark.parametrize(("max_sessions", "percent", "quantity", "threshold"), [
    (32, 70, "22400m", "22.4"), (10, 50, "5", "5"), (3, 33, "990m", "0.99"), (1024, 100, "1024", "1024")])
def test_the_per_pod_target_is_exact(max_sessions: int, percent: int, quantity: str, threshold: str) -> None:
    body = objects.liveengine(objects.sim_spec(capacity={"maxSessions": max_sessions}, autoscaling={
        "enabled": True, "targetOccupancyPercent": percent}))
    le = spec.parse(body)
    assert render.render_hpa(le)["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == quantity
    assert {t["metadata"]["threshold"] for t in render.render_scaledobject(le, SETTINGS)["spec"]["triggers"]} == {
        threshold}


def test_both_providers_scale_the_liveengine_on_the_same_signals_and_behaviour() -> None:
    hpa, so = _rendered("hpa", scaleDownStabilizationSeconds=120, scaleDownPeriodSeconds=30), _rendered("keda")
    target = {"apiVersion": names.API_VERSION, "kind": names.KIND, "name": "pp"}
    assert hpa["spec"]["scaleTargetRef"] == so["spec"]["scaleTargetRef"] == target
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 6)
    assert hpa["spec"]["behavior"]["scaleDown"] == {
        "stabilizationWindowSeconds": 120, "selectPolicy": "Max",
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}
    assert hpa["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == 0
    queries = [t["metadata"]["query"] for t in so["spec"]["triggers"]]
    t = signals.Target("voice", "pp")
    assert queries == [signals.occupied_query(t), signals.demand_query(t)]
    # one label names the LiveEngine on engine and gateway series alike
    assert queries[0].count('{liveengine="voice/pp"}') == 2 and 'liveengine="voice/pp",reason' in queries[1]


def test_no_autoscaler_when_disabled_or_absent() -> None:
    assert render.render_autoscaler(spec.parse(_le(enabled=False)), SETTINGS) is None
    assert render.render_autoscaler(spec.parse(objects.liveengine(objects.sim_spec())), SETTINGS) is None
    with pytest.raises(ValueError, match="autoscaling"):
        render.render_hpa(spec.parse(_le(enabled=False)))


def _foreign_hpa(name: str = "manual", target: str = "pp", owners: list[dict[str, Any]] | None = None) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "voice", "ownerReferences": owners or []},
            "spec": {"scaleTargetRef": {"apiVersion": "live.liveplex.io/v1", "kind": "LiveEngine", "name": target},
                     "minReplicas": 1, "maxReplicas": 3}}


def test_foreign_autoscalers_are_those_not_owned_by_the_liveengine_or_its_scaledobject() -> None:
    le = spec.parse(_le())
    own = _rendered("hpa")
    own["metadata"]["ownerReferences"][0]["uid"] = le.uid
    keda_made = _foreign_hpa("keda-hpa-pp", owners=[{"kind": "ScaledObject", "name": "pp", "uid": "so"}])
    own_so = _rendered("keda")
    assert autoscalers.foreign(le, [own, keda_made], [own_so]) == ()
    assert autoscalers.foreign(le, [keda_made], []) == ("HorizontalPodAutoscaler/keda-hpa-pp",)
    assert autoscalers.foreign(le, [_foreign_hpa(), _foreign_hpa("other", target="qq")], []) == (
        "HorizontalPodAutoscaler/manual",)
    assert autoscalers.foreign(le, [_foreign_hpa("pp", target="qq")], []) == ("HorizontalPodAutoscaler/pp",)


async def _reconcile(client: FakeKubeClient, body: dict[str, Any]) -> None:
    ctx = handlers.Context(settings=SETTINGS, client=client, events=FakeEvents())
    await handlers.reconcile(body=body, patch=kopf.Patch(), logger=LOG, memo=kopf.Memo(context=ctx))


async def _roll_up(client: FakeKubeClient, body: dict[str, Any], events: FakeEvents | None = None) -> kopf.Patch:
    ctx = handlers.Context(settings=SETTINGS, client=client, events=events or FakeEvents())
    patch = kopf.Patch()
    await handlers.roll_up(body=body, patch=patch, logger=LOG, memo=kopf.Memo(context=ctx))
    return patch


async def test_reconcile_applies_one_autoscaler_and_switching_provider_replaces_it() -> None:
    client = FakeKubeClient()
    await _reconcile(client, _le("hpa"))
    assert HPA in client.objects and SCALED not in client.objects
    assert client.objects[HPA]["metadata"]["ownerReferences"][0]["uid"] == "uid-pp"
    await _reconcile(client, _le("keda"))
    assert SCALED in client.objects and HPA not in client.objects
    await _reconcile(client, _le("keda", enabled=False))
    assert SCALED not in client.objects and HPA not in client.objects


async def test_a_replayed_reconcile_writes_nothing_new() -> None:
    client = FakeKubeClient()
    await _reconcile(client, _le("hpa"))
    writes = len(client.writes)
    await _reconcile(client, _le("hpa"))
    assert len(client.writes) == writes == 4


async def test_a_foreign_hpa_stops_the_operators_own_and_sets_the_condition() -> None:
    client = FakeKubeClient()
    await _reconcile(client, _le("hpa"))
    client.put(_foreign_hpa())
    events = FakeEvents()
    patch = await _roll_up(client, _le("hpa"), events)
    assert HPA not in client.objects
    cond = {c["type"]: c for c in patch.status["conditions"]}["Autoscaling"]
    assert (cond["status"], cond["reason"]) == ("False", "AutoscalerConflict")
    assert "HorizontalPodAutoscaler/manual" in cond["message"]
    assert ("pp", "Warning", "AutoscalerConflict", f"Autoscaling=False: {cond['message']}") in events.posted
    await _reconcile(client, _le("hpa"))
    assert HPA not in client.objects


async def test_an_hpa_of_the_same_name_is_never_overwritten() -> None:
    client = FakeKubeClient()
    client.put(_foreign_hpa("pp", target="somewhere-else"))
    await _reconcile(client, _le("hpa"))
    assert client.objects[HPA]["spec"]["scaleTargetRef"]["name"] == "somewhere-else"


async def test_without_keda_installed_an_hpa_is_still_rendered() -> None:
    client = FakeKubeClient()
    client.unserved.add(names.SCALED_OBJECT)
    await _reconcile(client, _le("hpa"))
    patch = await _roll_up(client, _le("hpa"))
    assert HPA in client.objects
    cond = {c["type"]: c for c in patch.status["conditions"]}["Autoscaling"]
    assert (cond["status"], cond["reason"]) == ("True", "AutoscalerRendered")


async def test_a_liveengine_without_autoscaling_leaves_others_hpas_alone() -> None:
    client = FakeKubeClient()
    client.put(_foreign_hpa("pp"))
    await _reconcile(client, objects.liveengine(objects.sim_spec()))
    assert HPA in client.objects
