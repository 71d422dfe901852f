"""`Tls`: how a server dials another that serves TLS: the CA it trusts and the name it checks.

A gateway dials its pods (`--upstream-ca`, `--upstream-server-name`: `gateway.pod_link`) and, to
relay a WebRTC call's sideband, its peer replicas (`--peer-ca`, `--peer-server-name`:
`webrtc.forward`). Both dial by IP address, which a certificate made for a name does not carry,
so the name it does carry is checked instead.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Tls:
    """The CA (`context`) and the name the other's certificate carries (None: the address dialed,
    which it must then carry as an IP SAN)."""

    context: ssl.SSLContext
    server_name: str | None = None

    @classmethod
    def trusting(cls, ca: Path | None, server_name: str | None = None) -> Tls:
        """Trust the PEM bundle `ca` (None: the system's CAs); raises OSError or ssl.SSLError when
        it is no readable PEM bundle."""
        return cls(ssl.create_default_context(cafile=None if ca is None else str(ca)), server_name)
