"""A pod's ServiceAccount credentials as the kubelet projects them (pure; the kubelet writes the files).

Development emulator, not for production. A real kubelet mounts a projected volume with `token`,
`ca.crt` and `namespace` at `MOUNT_PATH` and sets `KUBERNETES_SERVICE_HOST`/`_PORT`, from which the
official client's and kopf's in-cluster configuration read everything. The podman runtime does
exactly that (the folder mounted read-only, the variables naming the emulator's own address). A
process pod cannot see a fixed path of its own, so it gets a kubeconfig with the same token and the
CA as a file path (`KUBECONFIG`). Neither happens when `automountServiceAccountToken` is false on
the pod or, when the pod does not say, on its ServiceAccount.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from liveplex.emulator import kubeconfig

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_ACCOUNT = "default"


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a pod of a ServiceAccount needs to reach the API server as that account."""

    token: str
    namespace: str
    ca_pem: bytes
    host: str
    port: int


def account_name(pod: Mapping) -> str:
    return pod["spec"].get("serviceAccountName") or DEFAULT_ACCOUNT


def automount(pod: Mapping, account: Mapping | None) -> bool:
    """The pod's `automountServiceAccountToken`, else its ServiceAccount's, else true (upstream's order)."""
    own = pod["spec"].get("automountServiceAccountToken")
    if own is not None:
        return bool(own)
    inherited = (account or {}).get("automountServiceAccountToken")
    return True if inherited is None else bool(inherited)


def files(creds: Credentials) -> dict[str, bytes]:
    """The projected volume's files."""
    return {"token": creds.token.encode(), "ca.crt": creds.ca_pem, "namespace": creds.namespace.encode()}


def service_env(creds: Credentials) -> dict[str, str]:
    """The variables in-cluster configuration reads beside the mounted files."""
    return {"KUBERNETES_SERVICE_HOST": creds.host, "KUBERNETES_SERVICE_PORT": str(creds.port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(creds.port)}


def process_kubeconfig(creds: Credentials, ca_file: Path) -> str:
    """A process pod's stand-in: the same token, the CA by path (no inline data to write out)."""
    return kubeconfig.render(f"https://{creds.host}:{creds.port}", creds.token, creds.namespace,
                             ca_file=str(ca_file))
