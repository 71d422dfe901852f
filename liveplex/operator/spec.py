"""A LiveEngine as frozen values: defaulted, checked once, trusted by every renderer afterwards.

`parse` applies the CRD's defaults, its structural schema and the CEL rules' Python twins, and
either returns a `LiveEngine` or raises one `SpecError` listing every offending field path (the
operator reports it as `Ready=False, reason=InvalidSpec`). Defaults live in the CRD schema only;
the one default that depends on the engine kind (a personaplex pod's GPU) is `gpus` below. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from liveplex.operator import crd, names, schema

EngineKind = Literal["personaplex", "sim"]
Json = Mapping[str, Any]


class SpecError(ValueError):
    """A LiveEngine the operator cannot render; `issues` name the fields."""

    def __init__(self, issues: tuple[schema.Issue, ...]) -> None:
        super().__init__("; ".join(map(str, issues)))
        self.issues = issues

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(schema.render_path(issue.path) for issue in self.issues)


@dataclass(frozen=True, slots=True)
class Sim:
    tick_base_micros: int
    tick_per_session_micros: int
    echo_frames: int


@dataclass(frozen=True, slots=True)
class PvcSource:
    claim_name: str
    path: str


@dataclass(frozen=True, slots=True)
class HostPathSource:
    path: str


@dataclass(frozen=True, slots=True)
class ImageSource:
    reference: str
    path: str


@dataclass(frozen=True, slots=True)
class SecretRef:
    name: str
    key: str


@dataclass(frozen=True, slots=True)
class FetchSource:
    """Downloaded by the `fetch-model` init container into `path` of a claim or an emptyDir."""

    url: str
    token_secret: SecretRef | None
    sha256: Mapping[str, str]
    claim_name: str | None
    """None: an emptyDir per pod."""
    path: str


ModelSource = PvcSource | HostPathSource | ImageSource | FetchSource


@dataclass(frozen=True, slots=True)
class Model:
    name: str
    served_models: tuple[str, ...]
    dtype: str
    kv_dtype: str | None
    """The KV ring's dtype; None: `dtype`'s (the engine's default)."""
    source: ModelSource | None
    """Set exactly when the engine is personaplex (CEL)."""
    attention: str | None
    """None: the engine's default for its device."""
    prefill_budget_millis: int
    """0: the engine derives its budget from measured cost."""


@dataclass(frozen=True, slots=True)
class Image:
    repository: str | None
    tag: str | None
    pull_policy: str | None


@dataclass(frozen=True, slots=True)
class Capacity:
    max_sessions: int
    max_seconds: int
    jitter_frames: int
    prebuffer_frames: int
    lateness_budget_millis: int


@dataclass(frozen=True, slots=True)
class Pacing:
    """`spec.pacing`: when a tick's frames leave (the pod's `--pace-*-ms`)."""

    lead_millis: int
    spread_millis: int


@dataclass(frozen=True, slots=True)
class Pause:
    """`spec.pause`: the pod's idle pause (`serve --idle-pause-s`, `--vad-threshold`, `--wake-reserve`,
    `--max-paused`, `--pause-host-budget-bytes`)."""

    idle_seconds: int
    """0: WebSocket sessions never pause (WebRTC calls may still ask, while `max_paused` > 0)."""
    vad_threshold_percent: int
    wake_reserve: int
    max_paused: int
    host_budget_gib: int
    """0: no bound but `max_paused`."""


@dataclass(frozen=True, slots=True)
class Resources:
    gpus: int
    """Effective: the spec's value, else 1 for personaplex and 0 for sim."""
    cpu: str | None
    memory: str | None


@dataclass(frozen=True, slots=True)
class PodOverrides:
    """`spec.pod`: Kubernetes values passed through as plain JSON."""

    node_selector: Mapping[str, str]
    tolerations: tuple[Json, ...]
    affinity: Json | None
    priority_class_name: str | None
    runtime_class_name: str | None
    image_pull_secrets: tuple[str, ...] | None
    """None (unset): the operator's defaults; these three are the same."""
    env: tuple[Json, ...]
    annotations: Mapping[str, str]
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Autoscaling:
    enabled: bool
    provider: str
    min_replicas: int
    max_replicas: int
    target_occupancy_percent: int
    scale_down_stabilization_seconds: int
    scale_down_period_seconds: int


@dataclass(frozen=True, slots=True)
class EngineSpec:
    replicas: int
    kind: EngineKind
    sim: Sim | None
    model: Model | None
    image: Image
    capacity: Capacity
    resources: Resources
    pod: PodOverrides
    drain_grace_seconds: int
    reattach_grace_seconds: int
    """`spec.continuity.reattachGraceSeconds`: how long a pod keeps a call whose gateway went away."""
    pause: Pause
    autoscaling: Autoscaling | None
    pacing: Pacing | None
    """None: the engine's defaults."""
    sub_pools: int
    """`spec.placement.subPools`: the pool's sub-pools in Redis (1: not split)."""


@dataclass(frozen=True, slots=True)
class LiveEngine:
    """The parts of a LiveEngine object the renderers and the status roll-up read."""

    name: str
    namespace: str
    uid: str
    generation: int
    created: str
    """`metadata.creationTimestamp` (RFC 3339): the older claimant keeps a contested model."""
    labels: Mapping[str, str]
    spec: EngineSpec

    @property
    def pool(self) -> str:
        return names.pool(self.namespace, self.name)


_SCHEMA = crd.object_schema()
"""Read only: the defaulter and the checker never change the schema they walk."""


def defaulted(body: Json) -> dict[str, Any]:
    """`body` with the CRD's defaults applied, as the API server stores it."""
    return schema.apply_defaults(_SCHEMA, dict(body))


def validate(body: Json) -> dict[str, Any]:
    """The defaulted object; raises SpecError naming every structural or cross-field problem."""
    obj = defaulted(body)
    issues = schema.check(_SCHEMA, obj)
    if not issues:
        issues = schema.rule_issues(obj)
    if issues:
        raise SpecError(tuple(issues))
    return obj


def parse(body: Json) -> LiveEngine:
    """Check `body` (a LiveEngine object; `status` is ignored) and build its values."""
    obj = validate({k: v for k, v in body.items() if k != "status"})
    meta, raw = obj["metadata"], obj["spec"]
    kind: EngineKind = raw["engine"]["kind"]
    return LiveEngine(
        name=meta["name"], namespace=meta.get("namespace", "default"), uid=meta.get("uid", ""),
        generation=int(meta.get("generation", 0)), created=meta.get("creationTimestamp", ""),
        labels=dict(meta.get("labels", {})),
        spec=EngineSpec(
            replicas=raw["replicas"], kind=kind, sim=_sim(raw["engine"].get("sim")),
            model=_model(raw.get("model")), image=_image(raw.get("image", {})),
            capacity=_capacity(raw["capacity"]), resources=_resources(kind, raw.get("resources", {})),
            pod=_pod(raw.get("pod", {})), drain_grace_seconds=raw["drain"]["gracePeriodSeconds"],
            reattach_grace_seconds=raw["continuity"]["reattachGraceSeconds"], pause=_pause(raw["pause"]),
            autoscaling=_autoscaling(raw.get("autoscaling")), pacing=_pacing(raw.get("pacing")),
            sub_pools=raw["placement"]["subPools"],
        ),
    )


def _sim(raw: Json | None) -> Sim | None:
    if raw is None:
        return None
    return Sim(raw["tickBaseMicros"], raw["tickPerSessionMicros"], raw["echoFrames"])


def _model(raw: Json | None) -> Model | None:
    if raw is None:
        return None
    return Model(raw["name"], tuple(raw["servedModels"]), raw["dtype"], raw.get("kvDtype"),
                 _source(raw.get("source")), raw.get("attention"), raw["prefillBudgetMillis"])


def _source(raw: Json | None) -> ModelSource | None:
    if raw is None:
        return None
    if "pvc" in raw:
        return PvcSource(raw["pvc"]["claimName"], raw["pvc"].get("path", ""))
    if "hostPath" in raw:
        return HostPathSource(raw["hostPath"]["path"])
    if "fetch" in raw:
        f = raw["fetch"]
        token = f.get("tokenSecret")
        return FetchSource(f["url"], None if token is None else SecretRef(token["name"], token["key"]),
                           dict(f.get("sha256", {})), f.get("claimName"), f["path"])
    return ImageSource(raw["image"]["reference"], raw["image"].get("path", ""))


def _pacing(raw: Json | None) -> Pacing | None:
    return None if raw is None else Pacing(raw["leadMillis"], raw["spreadMillis"])


def _pause(raw: Json) -> Pause:
    return Pause(raw["idleSeconds"], raw["vadThresholdPercent"], raw["wakeReserve"], raw["maxPaused"],
                 raw["hostBudgetGiB"])


def _image(raw: Json) -> Image:
    return Image(raw.get("repository"), raw.get("tag"), raw.get("pullPolicy"))


def _capacity(raw: Json) -> Capacity:
    return Capacity(raw["maxSessions"], raw["maxSeconds"], raw["jitterFrames"], raw["prebufferFrames"],
                    raw["latenessBudgetMillis"])


def _resources(kind: EngineKind, raw: Json) -> Resources:
    gpus = raw.get("gpus", 1 if kind == "personaplex" else 0)
    cpu, memory = (None if raw.get(key) is None else str(raw[key]) for key in ("cpu", "memory"))
    return Resources(gpus, cpu, memory)  # quantities as strings: the API server stores `8` as "8"


def _pod(raw: Json) -> PodOverrides:
    return PodOverrides(
        node_selector=dict(raw.get("nodeSelector", {})), tolerations=tuple(raw.get("tolerations", ())),
        affinity=raw.get("affinity"), priority_class_name=raw.get("priorityClassName"),
        runtime_class_name=raw.get("runtimeClassName"),
        image_pull_secrets=None if "imagePullSecrets" not in raw else tuple(s["name"] for s in raw["imagePullSecrets"]),
        env=tuple(raw.get("env", ())), annotations=dict(raw.get("annotations", {})),
        labels=dict(raw.get("labels", {})),
    )


def _autoscaling(raw: Json | None) -> Autoscaling | None:
    if raw is None:
        return None
    return Autoscaling(raw["enabled"], raw["provider"], raw["minReplicas"], raw["maxReplicas"],
                       raw["targetOccupancyPercent"], raw["scaleDownStabilizationSeconds"],
                       raw["scaleDownPeriodSeconds"])
