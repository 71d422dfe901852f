"""A LiveEngine's children as plain dicts: Deployment, headless Service, PodDisruptionBudget, autoscaler.

Pure and deterministic: the same LiveEngine and settings always render the same objects, so the
applier's second pass is a no-op. The renderers do what `kopf.adopt` would (owner reference,
namespace, the parent's labels on each child's metadata) without mutating anything, and never
put a user label in a selector (platform §4 rule 3). The engine pod runs `liveplex serve` with
the flags the spec implies; the probes, preStop drain and grace follow platform §5. The
autoscaler (an HPA or a KEDA ScaledObject on the LiveEngine's scale subresource, platform §8)
scales on `signals`: up at once, down by one pod per period after the stabilisation window.
Every pod passes Pod Security "restricted": non-root 65532, RuntimeDefault seccomp, no
capabilities, a read-only root with emptyDirs where the image writes, no service account token.
A `fetch` model source adds an init container (`liveplex fetch-model`, same image) that fills the
model volume before the engine starts.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Any

from liveplex.operator import names, signals
from liveplex.operator.settings import OperatorSettings
from liveplex.operator.spec import Autoscaling, FetchSource, HostPathSource, ImageSource, LiveEngine, PvcSource

Obj = dict[str, Any]

GRACE_MARGIN_S = 30
"""terminationGracePeriodSeconds = drain deadline + this: time to answer, close and exit."""
PROBE_PERIOD_S = 5
STARTUP_BUDGET_S = {"personaplex": 1800, "sim": 300}
"""How long a pod may take to turn ready the first time: weights load and CUDA warm-up take minutes."""
GPU_RESOURCE = "nvidia.com/gpu"
GIB = 1 << 30
"""`spec.pause.hostBudgetGiB`'s unit, in the pod's bytes (`--pause-host-budget-bytes`)."""
SCALE_UP_PERIOD_S = 15
SCALE_UP_POLICIES: tuple[tuple[str, int], ...] = (("Percent", 100), ("Pods", 4))
"""Scale up without stabilisation by the larger of doubling or four pods per period (the HPA's own
default): a cold GPU pod takes minutes, so waiting only adds to it."""
KEDA_POLLING_S = 15
FETCH_RESOURCES: Obj = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
"""The download streams to disk: its memory does not grow with the checkpoint."""
POD_SECURITY: Obj = {"runAsNonRoot": True, "runAsUser": names.POD_USER, "runAsGroup": names.POD_USER,
                     "fsGroup": names.POD_USER, "fsGroupChangePolicy": "OnRootMismatch",
                     "seccompProfile": {"type": "RuntimeDefault"}}
"""fsGroup: a fetched model's claim and the emptyDirs are writable by the pod's user; OnRootMismatch:
the kubelet does not re-chown a 15 GB checkpoint at every pod start."""
CONTAINER_SECURITY: Obj = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                           "capabilities": {"drop": ["ALL"]}}
"""Pod Security "restricted" for every container; the images write only to the emptyDirs."""


def _owner(le: LiveEngine) -> list[Obj]:
    return [{"apiVersion": names.API_VERSION, "kind": names.KIND, "name": le.name, "uid": le.uid,
             "controller": True, "blockOwnerDeletion": True}]


def _metadata(le: LiveEngine) -> Obj:
    """A child's metadata: the parent's labels (as kopf.adopt copies them), then the fixed ones."""
    return {"name": le.name, "namespace": le.namespace,
            "labels": {**le.labels, **names.MANAGED_BY, **names.selector(le.name)},
            "ownerReferences": _owner(le)}


def serve_args(le: LiveEngine, settings: OperatorSettings) -> list[str]:
    """`liveplex serve`'s arguments for this engine; `$(VAR)` is expanded by the kubelet. Its pods
    accept every name the LiveEngine claims (`routes`): `model.name` is a sim pod's own id and one
    more alias of a personaplex pod (whose id comes from its checkpoint)."""
    s, cap = le.spec, le.spec.capacity
    pod_ip = f"$({names.POD_IP_ENV})"
    args = ["serve", "--engine", s.kind, "--host", pod_ip, "--port", str(names.PORT),
            "--admin-host", pod_ip, "--admin-port", str(names.ADMIN_PORT),
            "--max-sessions", str(cap.max_sessions), "--max-seconds", str(cap.max_seconds),
            "--jitter-frames", str(cap.jitter_frames), "--prebuffer-frames", str(cap.prebuffer_frames),
            "--lateness-budget-ms", str(cap.lateness_budget_millis),
            "--drain-deadline-s", str(s.drain_grace_seconds),
            "--reattach-grace-s", str(s.reattach_grace_seconds),
            "--idle-pause-s", str(s.pause.idle_seconds), "--vad-threshold", str(s.pause.vad_threshold_percent / 100),
            "--wake-reserve", str(s.pause.wake_reserve), "--max-paused", str(s.pause.max_paused),
            "--pause-host-budget-bytes", str(s.pause.host_budget_gib * GIB)]
    if s.pacing is not None:
        args += ["--pace-lead-ms", str(s.pacing.lead_millis), "--pace-spread-ms", str(s.pacing.spread_millis)]
    if settings.pod_tls_secret is not None:
        args += ["--tls-cert", f"{names.TLS_MOUNT}/tls.crt", "--tls-key", f"{names.TLS_MOUNT}/tls.key"]
    if settings.redis_configured:  # the member name is the Kubernetes pod name: pod-deletion-cost keys on it
        args += ["--pool", le.pool,  # the Redis URL only in the env: a flag would show its password
                 "--advertise", f"ws://{pod_ip}:{names.PORT}", "--pod-name", f"$({names.POD_NAME_ENV})"]
        if s.sub_pools > 1:
            args += ["--subpools", str(s.sub_pools)]
    aliases = s.model.served_models if s.model is not None else ()
    if s.kind == "personaplex":
        assert s.model is not None  # CEL: personaplex has a model with a source
        aliases = tuple(dict.fromkeys((s.model.name, *aliases)))
        args += ["--model-path", model_path(le), "--dtype", s.model.dtype, "--device", "cuda",
                 "--prefill-budget-ms", str(s.model.prefill_budget_millis)]
        if s.model.attention is not None:
            args += ["--attention", s.model.attention]
        if s.model.kv_dtype is not None:
            args += ["--kv-dtype", s.model.kv_dtype]
    else:
        if s.model is not None:
            args += ["--model", s.model.name]
        if s.sim is not None:
            args += ["--tick-base-us", str(s.sim.tick_base_micros),
                     "--tick-per-session-us", str(s.sim.tick_per_session_micros),
                     "--echo-frames", str(s.sim.echo_frames)]
    for alias in aliases:
        args += ["--model-alias", alias]
    return args


def model_path(le: LiveEngine) -> str:
    """The checkpoint directory inside the container."""
    source = le.spec.model.source if le.spec.model is not None else None
    inner = source.path if isinstance(source, (PvcSource, ImageSource, FetchSource)) else ""
    return posixpath.join(names.MODEL_MOUNT, inner) if inner else names.MODEL_MOUNT


def _fetch_source(le: LiveEngine) -> FetchSource | None:
    source = le.spec.model.source if le.spec.model is not None else None
    return source if isinstance(source, FetchSource) else None


def _model_volume(le: LiveEngine) -> Obj | None:
    source = le.spec.model.source if le.spec.model is not None else None
    if isinstance(source, FetchSource):  # the init container writes it; the engine mounts it read-only
        if source.claim_name is not None:
            return {"name": "model", "persistentVolumeClaim": {"claimName": source.claim_name}}
        return {"name": "model", "emptyDir": {}}
    if isinstance(source, PvcSource):
        return {"name": "model", "persistentVolumeClaim": {"claimName": source.claim_name, "readOnly": True}}
    if isinstance(source, HostPathSource):
        return {"name": "model", "hostPath": {"path": source.path, "type": "Directory"}}
    if isinstance(source, ImageSource):
        return {"name": "model", "image": {"reference": source.reference, "pullPolicy": "IfNotPresent"}}
    return None


def _env(le: LiveEngine, settings: OperatorSettings) -> list[Obj]:
    env: list[Obj] = [
        {"name": names.POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": names.POD_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    if settings.redis_secret is not None:
        env.append({"name": names.REDIS_URL_ENV, "valueFrom": {"secretKeyRef": {
            "name": settings.redis_secret.name, "key": settings.redis_secret.key}}})
        env.append({"name": names.REDIS_CA_ENV, "valueFrom": {"secretKeyRef": {  # rediss:// with a private CA
            "name": settings.redis_secret.name, "key": names.REDIS_CA_KEY, "optional": True}}})
    elif settings.redis_url is not None:
        env.append({"name": names.REDIS_URL_ENV, "value": settings.redis_url})
    if settings.pod_token_secret is not None:
        env.append({"name": names.API_KEYS_ENV, "valueFrom": {"secretKeyRef": {
            "name": settings.pod_token_secret.name, "key": settings.pod_token_secret.key}}})
    return env + [dict(e) for e in le.spec.pod.env]


def _admin_get(path: str) -> Obj:
    """Probes and the preStop drain go to the admin listener: a flood on the client port cannot
    fail a probe, and no client can drain the pod."""
    return {"httpGet": {"path": path, "port": names.ADMIN_PORT_NAME}}


def _resources(le: LiveEngine) -> Obj:
    r = le.spec.resources
    requests = {k: v for k, v in (("cpu", r.cpu), ("memory", r.memory)) if v is not None}
    limits = {k: v for k, v in (("memory", r.memory),) if v is not None}
    if r.gpus:
        limits[GPU_RESOURCE] = str(r.gpus)
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def image_ref(le: LiveEngine, settings: OperatorSettings) -> str:
    """The pod's image: `spec.image`, else the operator's (with torch for personaplex)."""
    image = le.spec.image
    default = settings.engine_image_repository if le.spec.kind == "personaplex" else settings.image_repository
    return f"{image.repository or default}:{image.tag or settings.image_tag}"


def _scratch_mounts() -> list[Obj]:
    return [{"name": name, "mountPath": path} for name, path, _ in names.SCRATCH_MOUNTS]


def _fetch_container(le: LiveEngine, source: FetchSource, settings: OperatorSettings) -> Obj:
    """`liveplex fetch-model` into the model volume; the pod starts only once it succeeded."""
    args = ["fetch-model", source.url, "--dest", model_path(le)]
    for path, digest in sorted(source.sha256.items()):
        args += ["--sha256", f"{path}={digest}"]
    container: Obj = {"name": names.FETCH_CONTAINER, "image": image_ref(le, settings), "command": ["liveplex"],
                      "args": args}
    if le.spec.image.pull_policy is not None:
        container["imagePullPolicy"] = le.spec.image.pull_policy
    env = [dict(e) for e in le.spec.pod.env]  # HF_ENDPOINT for a mirror, HTTPS_PROXY, ...
    if source.token_secret is not None:
        env.insert(0, {"name": names.FETCH_TOKEN_ENV, "valueFrom": {"secretKeyRef": {
            "name": source.token_secret.name, "key": source.token_secret.key}}})
    if env:
        container["env"] = env
    return container | {
        "resources": copy.deepcopy(FETCH_RESOURCES),
        "securityContext": copy.deepcopy(CONTAINER_SECURITY),
        "volumeMounts": [{"name": "model", "mountPath": names.MODEL_MOUNT}, *_scratch_mounts()],
    }


def _container(le: LiveEngine, settings: OperatorSettings) -> Obj:
    image = le.spec.image
    grace = le.spec.drain_grace_seconds
    container: Obj = {
        "name": names.CONTAINER,
        "image": image_ref(le, settings),
        "command": ["liveplex"],
        "args": serve_args(le, settings),
        "env": _env(le, settings),
        "ports": [{"name": names.PORT_NAME, "containerPort": names.PORT, "protocol": "TCP"},
                  {"name": names.ADMIN_PORT_NAME, "containerPort": names.ADMIN_PORT, "protocol": "TCP"}],
        "startupProbe": _admin_get("/ready") | {
            "periodSeconds": PROBE_PERIOD_S, "timeoutSeconds": 2,
            "failureThreshold": STARTUP_BUDGET_S[le.spec.kind] // PROBE_PERIOD_S},
        "readinessProbe": _admin_get("/ready") | {"periodSeconds": 2, "timeoutSeconds": 2, "failureThreshold": 2},
        "livenessProbe": _admin_get("/health") | {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
        "lifecycle": {"preStop": _admin_get(f"/drain?deadline_s={grace}")},
    }
    if image.pull_policy is not None:
        container["imagePullPolicy"] = image.pull_policy
    resources = _resources(le)
    if resources:
        container["resources"] = resources
    container["securityContext"] = copy.deepcopy(CONTAINER_SECURITY)
    mounts = [*_scratch_mounts(), {"name": names.SHM[0], "mountPath": names.SHM[1]}]
    if _model_volume(le) is not None:
        mounts.append({"name": "model", "mountPath": names.MODEL_MOUNT, "readOnly": True})
    if settings.pod_tls_secret is not None:
        mounts.append({"name": names.TLS_VOLUME, "mountPath": names.TLS_MOUNT, "readOnly": True})
    container["volumeMounts"] = mounts
    return container


def _volumes(le: LiveEngine, settings: OperatorSettings) -> list[Obj]:
    volumes = [{"name": name, "emptyDir": {"sizeLimit": size}} for name, _, size in names.SCRATCH_MOUNTS]
    volumes.append({"name": names.SHM[0], "emptyDir": {"medium": "Memory", "sizeLimit": names.SHM[2]}})
    model = _model_volume(le)
    if model is not None:
        volumes.append(model)
    if settings.pod_tls_secret is not None:  # a renewal reaches the files; the pod re-reads them
        volumes.append({"name": names.TLS_VOLUME, "secret": {"secretName": settings.pod_tls_secret}})
    return volumes


def _pod_spec(le: LiveEngine, settings: OperatorSettings) -> Obj:
    pod, defaults = le.spec.pod, settings.pod_defaults
    spec: Obj = {
        "automountServiceAccountToken": False,  # engines never call the API server
        "enableServiceLinks": False,
        "securityContext": copy.deepcopy(POD_SECURITY),
        "terminationGracePeriodSeconds": le.spec.drain_grace_seconds + GRACE_MARGIN_S,
    }
    fetch = _fetch_source(le)
    if fetch is not None:
        spec["initContainers"] = [_fetch_container(le, fetch, settings)]
    spec["containers"] = [_container(le, settings)]
    pull_secrets = defaults.image_pull_secrets if pod.image_pull_secrets is None else pod.image_pull_secrets
    optional = (("nodeSelector", pod.node_selector), ("tolerations", [dict(t) for t in pod.tolerations]),
                ("affinity", pod.affinity),
                ("priorityClassName", pod.priority_class_name or defaults.priority_class_name),
                ("runtimeClassName", pod.runtime_class_name or defaults.runtime_class_name),
                ("imagePullSecrets", [{"name": name} for name in pull_secrets]))
    spec |= {key: value for key, value in optional if value}
    spec["volumes"] = _volumes(le, settings)
    return spec


def render_deployment(le: LiveEngine, settings: OperatorSettings) -> Obj:
    template_meta: Obj = {"labels": {**le.spec.pod.labels, **names.selector(le.name)}}
    if le.spec.pod.annotations:
        template_meta["annotations"] = dict(le.spec.pod.annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(le),
        "spec": {
            "replicas": le.spec.replicas,
            "selector": {"matchLabels": names.selector(le.name)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": template_meta, "spec": _pod_spec(le, settings)},
        },
    }


def render_service(le: LiveEngine) -> Obj:
    """Headless: DNS and Prometheus discovery; gateways dial the pod addresses found in Redis."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(le),
        "spec": {
            "clusterIP": "None",
            "selector": names.selector(le.name),
            "ports": [{"name": names.PORT_NAME, "port": names.PORT, "targetPort": names.PORT_NAME,
                       "protocol": "TCP"}],
        },
    }


def render_pdb(le: LiveEngine) -> Obj:
    """Protects against node drains taking more than one pod at a time (not against scale-down)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(le),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": names.selector(le.name)}},
    }


def render_children(le: LiveEngine, settings: OperatorSettings) -> list[Obj]:
    """Everything the operator applies for one LiveEngine, in apply order (the autoscaler apart:
    it is applied only when no other autoscaler targets the LiveEngine)."""
    return [render_deployment(le, settings), render_service(le), render_pdb(le)]


def _targeting(le: LiveEngine, kind: tuple[str, str], spec: Obj) -> Obj:
    """An autoscaler of `kind` on the LiveEngine's scale subresource, owned by it."""
    target = {"apiVersion": names.API_VERSION, "kind": names.KIND, "name": le.name}
    return {"apiVersion": kind[0], "kind": kind[1], "metadata": _metadata(le),
            "spec": {"scaleTargetRef": target, **spec}}


def _enabled(le: LiveEngine) -> Autoscaling:
    a = le.spec.autoscaling
    if a is None or not a.enabled:
        raise ValueError(f"LiveEngine {le.namespace}/{le.name} has no spec.autoscaling enabled")
    return a


def behavior(a: Autoscaling) -> Obj:
    """The HPA `behavior` both providers get (KEDA passes it to the HPA it creates)."""
    return {
        "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": kind, "value": value, "periodSeconds": SCALE_UP_PERIOD_S} for kind, value in SCALE_UP_POLICIES]},
        "scaleDown": {"stabilizationWindowSeconds": a.scale_down_stabilization_seconds, "selectPolicy": "Max",
                      "policies": [{"type": "Pods", "value": 1, "periodSeconds": a.scale_down_period_seconds}]},
    }


def _per_pod_target(le: LiveEngine, a: Autoscaling) -> int:
    return signals.per_pod_target_milli(le.spec.capacity.max_sessions, a.target_occupancy_percent)


def milli_quantity(milli: int) -> str:
    """A Kubernetes Quantity for `milli` thousandths: `22400` -> `22400m`, `3000` -> `3`."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _decimal(milli: int) -> str:
    """`milli` thousandths as a plain decimal (KEDA thresholds are strings it parses as floats)."""
    whole, frac = divmod(milli, 1000)
    return f"{whole}.{frac:03d}".rstrip("0").rstrip(".")


def render_hpa(le: LiveEngine) -> Obj:
    """An autoscaling/v2 HPA on the scale subresource: occupancy per pod (custom metric) and
    demand per LiveEngine (external metric), both served by the chart's prometheus-adapter rules."""
    a = _enabled(le)
    target = {"type": "AverageValue", "averageValue": milli_quantity(_per_pod_target(le, a))}
    return _targeting(le, names.HPA, {
        "minReplicas": a.min_replicas,
        "maxReplicas": a.max_replicas,
        "metrics": [
            {"type": "Pods", "pods": {"metric": {"name": signals.OCCUPIED_METRIC}, "target": target}},
            {"type": "External", "external": {
                "metric": {"name": signals.DEMAND_METRIC,
                           "selector": {"matchLabels": {signals.SELECTOR_LABEL: le.name}}},
                "target": target}},
        ],
        "behavior": behavior(a),
    })


def render_scaledobject(le: LiveEngine, settings: OperatorSettings) -> Obj:
    """A KEDA ScaledObject on the scale subresource: the same two signals as prometheus triggers."""
    a = _enabled(le)
    t = signals.Target(le.namespace, le.name)
    threshold = _decimal(_per_pod_target(le, a))
    return _targeting(le, names.SCALED_OBJECT, {
        "minReplicaCount": a.min_replicas,
        "maxReplicaCount": a.max_replicas,
        "pollingInterval": KEDA_POLLING_S,
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior(a)}},
        "triggers": [
            {"type": "prometheus", "name": name, "metricType": "AverageValue",
             "metadata": {"serverAddress": settings.prometheus_url, "query": query, "threshold": threshold}}
            for name, query in (("occupancy", signals.occupied_query(t)), ("demand", signals.demand_query(t)))
        ],
    })


def render_autoscaler(le: LiveEngine, settings: OperatorSettings) -> Obj | None:
    """The autoscaler `spec.autoscaling` asks for, or None when it is absent or disabled."""
    a = le.spec.autoscaling
    if a is None or not a.enabled:
        return None
    return render_hpa(le) if a.provider == "hpa" else render_scaledobject(le, settings)
