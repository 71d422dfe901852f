"""The fixed names the operator owns: API coordinates, selector labels, annotations, env, ports.

Every module that renders, selects or checks one of these reads it here, so a rename is one edit.
"""

from __future__ import annotations

from liveplex import fetch_model, listen
from liveplex.gptlive.server import auth
from liveplex.placement import url

GROUP = "live.liveplex.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "LiveEngine"
PLURAL = "liveengines"
SINGULAR = "liveengine"
SHORT_NAMES: tuple[str, ...] = ("le",)

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
SELECTOR_KEYS: tuple[str, ...] = (NAME_LABEL, INSTANCE_LABEL)
"""The only labels a selector uses: users cannot edit them (kopf and kubectl copy user labels around)."""
APP = "liveengine"
"""The value of `app.kubernetes.io/name` on every engine child."""
OPERATOR = "liveplex-operator"
"""The operator as the children's manager and the Events' reporting component (`kubectl describe`'s From)."""
MANAGED_BY = {"app.kubernetes.io/managed-by": OPERATOR, "app.kubernetes.io/component": "engine"}
"""Informational labels on every child; never part of a selector."""

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LAST_APPLIED = f"{GROUP}/last-applied"
"""Child annotation: the desired object last applied, so a field dropped from the spec is removed."""

POD_IP_ENV = "POD_IP"
POD_NAME_ENV = "POD_NAME"
REDIS_URL_ENV = url.REDIS_URL_ENV
REDIS_CA_ENV = url.REDIS_CA_ENV
REDIS_CA_KEY = "ca"
"""The key of `--redis-secret`'s Secret that may hold the CA of a `rediss://` Redis (PEM)."""
API_KEYS_ENV = auth.ENV_KEYS
"""The keys an engine pod accepts: the installation's pod token, so only gateways reach it."""
RESERVED_ENV: tuple[str, ...] = (POD_IP_ENV, POD_NAME_ENV, REDIS_URL_ENV, REDIS_CA_ENV, API_KEYS_ENV)
"""Env vars the operator sets on the engine container; `spec.pod.env` may not override them."""

HPA: tuple[str, str] = ("autoscaling/v2", "HorizontalPodAutoscaler")
SCALED_OBJECT: tuple[str, str] = ("keda.sh/v1alpha1", "ScaledObject")
"""The autoscaler kinds (`api_version`, `kind`) the operator renders, and looks for others of."""

CONTAINER = "engine"
PORT = listen.DEFAULT_PORT
PORT_NAME = "http"
ADMIN_PORT = 9090
ADMIN_PORT_NAME = "admin"
"""The admin listener (`/drain`, `/metrics`, probes): no Service exposes it."""
MODEL_MOUNT = "/models"
TLS_VOLUME, TLS_MOUNT = "tls", "/etc/liveplex/tls"
"""Where engine pods find their serving certificate (`--pod-tls-secret`): `tls.crt`, `tls.key`."""
"""Where the model source is mounted in the engine container (read-only)."""
FETCH_CONTAINER = "fetch-model"
"""The init container that downloads a `fetch` model source (`liveplex fetch-model`)."""
FETCH_TOKEN_ENV = fetch_model.TOKEN_ENV
"""The download token `liveplex fetch-model` reads (the Hub's for hf://, a bearer token for https://)."""
POD_USER = 65532
"""The images' uid and gid (docs/images.md): numeric, so runAsNonRoot can verify it."""
SCRATCH_MOUNTS: tuple[tuple[str, str, str], ...] = (("tmp", "/tmp", "1Gi"), ("cache", "/var/cache/liveplex", "4Gi"))
"""(volume, mount path, size limit): the emptyDirs the images write to on their read-only root."""
SHM = ("dshm", "/dev/shm", "1Gi")
"""A memory-backed /dev/shm (the runtime's default is 64 MiB; torch's shared tensors use it)."""


def selector(name: str) -> dict[str, str]:
    """The selector labels of LiveEngine `name`'s pods."""
    return {NAME_LABEL: APP, INSTANCE_LABEL: name}


def selector_text(name: str) -> str:
    """`selector(name)` in the string form the scale subresource's `labelSelectorPath` needs."""
    return ",".join(f"{k}={v}" for k, v in selector(name).items())


def pool(namespace: str, name: str) -> str:
    """The Redis pool key of a LiveEngine (`<ns>/<name>`), as `liveplex serve --pool` takes it."""
    return f"{namespace}/{name}"
