"""The kubeconfig that points kubectl, kopf and the Kubernetes client at a running emulator.

Development emulator, not for production. Plain HTTP, so no certificates; the token is a
placeholder because the emulator authenticates no one. Written as JSON-quoted YAML, so no YAML
library is needed and every YAML reader (kubectl's included) reads it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CLUSTER = "liveplex-emulator"
"""The cluster, user and context name in every kubeconfig the emulator writes."""


def render(url: str, namespace: str = "default") -> str:
    q = json.dumps
    return "\n".join([
        "apiVersion: v1",
        "kind: Config",
        f"current-context: {q(CLUSTER)}",
        "clusters:",
        f"- name: {q(CLUSTER)}",
        f"  cluster: {{server: {q(url)}}}",
        "users:",
        f"- name: {q(CLUSTER)}",
        f"  user: {{token: {q('liveplex-emulator-has-no-auth')}}}",
        "contexts:",
        f"- name: {q(CLUSTER)}",
        f"  context: {{cluster: {q(CLUSTER)}, user: {q(CLUSTER)}, namespace: {q(namespace)}}}",
        "preferences: {}",
        "",
    ])


def write_kubeconfig(path: str | os.PathLike[str], url: str, namespace: str = "default") -> Path:
    """Write the kubeconfig for `url` to `path` (mode 0600, like kubectl's own) and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(url, namespace))
    out.chmod(0o600)
    return out
