"""Where a WebRTC call's ICE goes, and the TURN credentials for it: pure.

A TURN server in the chart (coturn) is shared by the calls' two ends: the server allocates its
own relayed candidates on it (`webrtc_ice_servers`), and a caller behind a firewall that blocks
UDP reaches it over TCP or TLS on 443 (`webrtc_caller_ice_servers`, handed out by
`GET /v1/live/ice_servers`). Neither end holds a long-lived password: both get time-limited
credentials minted from the secret coturn shares (its `use-auth-secret`/`static-auth-secret`,
the "TURN REST API" scheme: username `EXPIRY:NAME`, password base64(HMAC-SHA1(secret, username))),
so a caller's expire and a leaked one is worth `webrtc_ice_ttl_s` at most.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

ICE_SCHEMES = ("stun:", "turn:", "turns:")
TURN_SCHEMES = ("turn:", "turns:")
SEPARATOR = ":"
"""coturn's `rest-api-separator` (its default) between the expiry and the name."""


@dataclass(frozen=True, slots=True)
class Credential:
    """One TURN login: what `RTCIceServer` takes as `username` and `credential`."""

    username: str
    password: str = ""


def mint(secret: str, expires_at: int, name: str) -> Credential:
    """The TURN REST API credential coturn accepts until `expires_at` (unix seconds) for `name`."""
    username = f"{expires_at}{SEPARATOR}{name}"
    digest = hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()
    return Credential(username, base64.b64encode(digest).decode())


def fresh(secret: str, expires_at: int) -> Credential:
    """A credential for one call or one caller, under a random name (nothing of the API key)."""
    return mint(secret, expires_at, secrets.token_hex(8))


def browser_servers(urls: tuple[str, ...], credential: Credential | None) -> list[dict[str, object]]:
    """`RTCConfiguration.iceServers` as a browser (and aiortc) takes it: STUN URLs bare, the
    TURN URLs together with the credential (left out with none: they would be refused)."""
    stun = [url for url in urls if not url.startswith(TURN_SCHEMES)]
    turn = [url for url in urls if url.startswith(TURN_SCHEMES)]
    servers: list[dict[str, object]] = [{"urls": stun}] if stun else []
    if turn and credential is not None:
        servers.append({"urls": turn, "username": credential.username, "credential": credential.password})
    return servers


def check_urls(flag: str, urls: tuple[str, ...] | list[str]) -> None:
    """Raise ValueError naming `flag` for a URL that is not STUN or TURN."""
    for url in urls:
        if not url.startswith(ICE_SCHEMES):
            raise ValueError(f"{flag} must be a {', '.join(ICE_SCHEMES)} URL, got {url!r}")
