"""How the operator runs: one frozen value, built once from `liveplex operator run`'s flags."""

from __future__ import annotations

from dataclasses import dataclass

from liveplex import __version__

DEFAULT_REPOSITORY = "ghcr.io/liveplex/liveplex"
DEFAULT_ENGINE_REPOSITORY = "ghcr.io/liveplex/liveplex-engine"
"""The image with torch (docs/images.md) that personaplex pods run; sim pods run the plain one."""
DEFAULT_LIVENESS = "http://0.0.0.0:8080/healthz"
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
"""The Prometheus a kube-prometheus-stack install serves (its `prometheus-operated` Service)."""


@dataclass(frozen=True, slots=True)
class SecretKey:
    """A key of a Secret in each LiveEngine's namespace."""

    name: str
    key: str = "url"


@dataclass(frozen=True, slots=True)
class PodDefaults:
    """What engine pods get where their LiveEngine's `spec.pod` leaves it unset (the chart's values)."""

    runtime_class_name: str | None = None
    priority_class_name: str | None = None
    image_pull_secrets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OperatorSettings:
    """What the operator watches and what it tells the pods it renders."""

    namespaces: tuple[str, ...] = ()
    """Watched namespaces; empty: every namespace (`-A`)."""
    redis_url: str | None = None
    """The placement Redis: the operator reads pool load and writes `le:routes` there; pods get it
    as `LIVEPLEX_REDIS_URL` unless `redis_secret` is set. None: pods run standalone, no routes."""
    redis_secret: SecretKey | None = None
    """Pods read `LIVEPLEX_REDIS_URL` from this Secret instead of a literal (the URL holds a password)."""
    pod_token_secret: SecretKey | None = None
    """Pods accept only the token in this Secret (`LIVEPLEX_API_KEYS`), which the gateways present:
    sessions reach engines only through a gateway. None: pods take any client."""
    pod_tls_secret: str | None = None
    """Engine pods serve TLS with this `kubernetes.io/tls` Secret in their namespace (`tls.crt`,
    `tls.key`, re-read on renewal), for gateways run with `--upstream-ca`. None: plain."""
    image_repository: str = DEFAULT_REPOSITORY
    image_tag: str = __version__
    """The engine image when `spec.image` leaves it unset: the operator's own version."""
    engine_image_repository: str = DEFAULT_ENGINE_REPOSITORY
    """personaplex pods' image repository when `spec.image` leaves it unset (tag: `image_tag`)."""
    pod_defaults: PodDefaults = PodDefaults()
    liveness_endpoint: str = DEFAULT_LIVENESS
    """kopf's `--liveness` URL."""
    prometheus_url: str = DEFAULT_PROMETHEUS
    """Where a rendered KEDA ScaledObject's prometheus triggers query the signals."""
    status_interval_s: float = 10.0
    """Status roll-up period; a patch is sent only when the status changed."""
    metrics_host: str = "0.0.0.0"
    metrics_port: int | None = None
    """Where `/metrics` and `/healthz` listen; None: not served (the chart serves them on 9090)."""
    leader_lease: tuple[str, str] | None = None
    """The Lease (namespace, name) replicas elect a leader with; None: this replica reconciles alone."""
    lease_duration_s: int = 15
    """How long a holder that stopped renewing keeps the Lease (the longest a failover waits)."""

    def __post_init__(self) -> None:
        if self.status_interval_s <= 0:
            raise ValueError(f"--status-interval-s must be > 0, got {self.status_interval_s}")
        if self.lease_duration_s < 1:
            raise ValueError(f"--leader-lease-s must be >= 1, got {self.lease_duration_s}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"--metrics-port must be 0..65535, got {self.metrics_port}")

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces

    @property
    def redis_configured(self) -> bool:
        return self.redis_url is not None or self.redis_secret is not None
