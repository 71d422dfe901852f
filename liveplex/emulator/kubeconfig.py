"""The kubeconfig that points kubectl, kopf and the Kubernetes client at a running emulator.

Development emulator, not for production. It carries the emulator's CA (`certs.py`) and a token:
the admin token (cluster-admin) or a ServiceAccount's (what a pod gets). Written as JSON-quoted YAML, so no YAML
library is needed and every YAML reader (kubectl's included) reads it.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

CLUSTER = "liveplex-emulator"
"""The cluster, user and context name in every kubeconfig the emulator writes."""


def render(url: str, token: str, namespace: str = "default", ca_pem: bytes = b"", ca_file: str = "") -> str:
    """`ca_pem` goes inline (certificate-authority-data); `ca_file` names a file instead, which is what a
    pod's kubeconfig needs: the official client writes inline data to a temporary file, and a pod's
    root filesystem may be read-only."""
    q = json.dumps
    authority = (f", certificate-authority: {q(ca_file)}" if ca_file else
                 f", certificate-authority-data: {q(base64.b64encode(ca_pem).decode())}" if ca_pem else "")
    return "\n".join([
        "apiVersion: v1",
        "kind: Config",
        f"current-context: {q(CLUSTER)}",
        "clusters:",
        f"- name: {q(CLUSTER)}",
        f"  cluster: {{server: {q(url)}{authority}}}",
        "users:",
        f"- name: {q(CLUSTER)}",
        f"  user: {{token: {q(token)}}}",
        "contexts:",
        f"- name: {q(CLUSTER)}",
        f"  context: {{cluster: {q(CLUSTER)}, user: {q(CLUSTER)}, namespace: {q(namespace)}}}",
        "preferences: {}",
        "",
    ])


def write_kubeconfig(path: str | os.PathLike[str], url: str, token: str, namespace: str = "default",
                     ca_pem: bytes = b"", ca_file: str = "") -> Path:
    """Write the kubeconfig for `url`, `token` and the server's CA to `path` (mode 0600, like kubectl's
    own); returns the path."""
    return place(path, render(url, token, namespace, ca_pem, ca_file))


def place(path: str | os.PathLike[str], text: str) -> Path:
    """Write the kubeconfig `text` to `path` (mode 0600), renamed into place: a reader (a script
    waiting for the file) never sees half of it. Returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(text)
    partial.chmod(0o600)
    partial.replace(out)
    return out
