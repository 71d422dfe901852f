"""Server-layer settings shared by pods and the gateway, and the flags that build them.

Each flag's default is read from the settings dataclass (`default_of`), so a default is written
once. `settings_from_args` is the one place these flags become values; it raises ValueError
naming the bad flag.
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from liveplex.flags import default_of
from liveplex.gptlive.server import auth
from liveplex.gptlive.server.webrtc import ice
from liveplex.gptlive.settings import Settings

STATIC_DIR = Path(__file__).parent.parent / "static"


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """How a GPT-Live server's sockets and routes behave; durations carry their unit."""

    protocol: Settings = field(default_factory=Settings)
    api_keys: tuple[str, ...] = ()
    """Accepted bearer keys for the socket and `/v1/*`; empty: no key needed."""
    outbound_max_frames: int = 64
    """Audio frames queued for a slow client (≈5 s) before it is treated as gone."""
    outbound_max_bytes: int = 1 << 20
    """Bytes of events of any kind queued for a slow client before it is treated as gone."""
    header_timeout_s: float = 10.0
    """A connection must complete its request headers this long after it opened (or after the
    previous response), else it is aborted."""
    max_connections: int = 1000
    """Open connections, HTTP and WebSocket, on the client listener (under the usual limit of 1024
    file descriptors). At the cap a newcomer takes the place of the oldest connection that has not
    finished its request yet, and is aborted only when there is none."""
    max_pending_connections: int = 100
    """Connections on the client listener that have not finished a request (or sit idle between
    two): the unauthenticated ones. Past this, the oldest is aborted, so partial requests cannot
    starve clients that finish theirs (at most `max_connections`)."""
    admin_host: str = "127.0.0.1"
    """Where the admin listener (`/drain`, `/metrics`, stats) listens: loopback unless a pod
    network needs it (the chart sets 0.0.0.0 and exposes it through no Service)."""
    admin_port: int = 0
    """The admin listener's port; 0 picks a free one (the banner says which)."""
    tls_cert: Path | None = None
    """PEM certificate chain: the client listener serves TLS (`wss://`, `https://`); re-read when
    the file changes (a cert-manager renewal). The admin listener stays plain."""
    tls_key: Path | None = None
    """The certificate's PEM private key; given with `tls_cert` or not at all."""
    ws_ping_interval_s: float = 20.0
    """WebSocket keepalive ping period; a client that has not answered one within another period
    is aborted."""
    webrtc_open_timeout_s: float = 10.0
    """A WebRTC call whose caller has not completed ICE and DTLS and opened its data channel this
    long after the answer is ended (`webrtc.call`): its slot is never held by a caller that left."""
    webrtc_silence_timeout_s: float = 10.0
    """A WebRTC call whose caller sent no audio packet for this long is ended as gone: a browser
    sends one at least every 400 ms even when silent (Opus DTX), and a caller whose network
    vanished is otherwise only found by ICE consent checks, about 30 s later."""
    webrtc_ice_servers: tuple[str, ...] = ()
    """STUN/TURN servers for WebRTC calls' own ICE (`stun:`, `turn:`, `turns:` URLs): in a cluster
    the chart's TURN server, so callers reach the call's media through it (docs/webrtc.md)."""
    webrtc_ice_username: str | None = None
    """The TURN username (with `webrtc_ice_password`)."""
    webrtc_ice_password: str | None = field(default=None, repr=False)
    """The TURN password, read from `--webrtc-ice-password-file` (never a flag's value)."""
    webrtc_ice_secret: str | None = field(default=None, repr=False)
    """The TURN server's shared secret (coturn's `static-auth-secret`), read from
    `--webrtc-ice-secret-file`: each call's and each caller's credentials are minted from it,
    valid `webrtc_ice_ttl_s` (`webrtc.ice`); instead of a username and password."""
    webrtc_ice_ttl_s: int = 86_400
    """How long a minted TURN credential is valid: a call's allocation is refreshed with it for
    the whole call (a session lasts at most a day), and a caller must start its call within it."""
    webrtc_caller_ice_servers: tuple[str, ...] = ()
    """The STUN/TURN servers handed to callers by `GET /v1/live/ice_servers` (the addresses a
    caller outside reaches: `turns:` on 443 for networks that block UDP), TURN ones with a minted
    credential; needs `webrtc_ice_secret` for TURN URLs (a static password is never handed out)."""
    webrtc_relay_only: bool = False
    """Offer callers only relayed candidates (through the TURN server): a pod's own addresses are
    of no use outside the cluster."""
    sweep_ms: int = 50
    """Period of the one shared timer that fires idle, start and grace deadlines."""
    metrics: bool = True
    """Serve `/metrics`; 503 when off."""
    static_dir: Path = STATIC_DIR
    """The demo page's files, served at `/` and `/static/`."""

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        ice.check_urls("webrtc_ice_servers", self.webrtc_ice_servers)
        ice.check_urls("webrtc_caller_ice_servers", self.webrtc_caller_ice_servers)
        if self.webrtc_relay_only and not any(url.startswith(ice.TURN_SCHEMES) for url in self.webrtc_ice_servers):
            raise ValueError("webrtc_relay_only needs a turn: or turns: server in webrtc_ice_servers")
        if self.webrtc_ice_secret is not None and self.webrtc_ice_password is not None:
            raise ValueError("webrtc_ice_secret and webrtc_ice_password: one or the other")
        if self.webrtc_ice_secret is None and any(
                url.startswith(ice.TURN_SCHEMES) for url in self.webrtc_caller_ice_servers):
            raise ValueError("webrtc_caller_ice_servers: a TURN URL needs webrtc_ice_secret "
                             "to mint callers' credentials")
        for name in ("outbound_max_frames", "outbound_max_bytes", "header_timeout_s", "max_connections",
                     "max_pending_connections", "ws_ping_interval_s", "webrtc_open_timeout_s",
                     "webrtc_silence_timeout_s", "webrtc_ice_ttl_s", "sweep_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The GPT-Live server flags (a pod and the gateway both take them)."""
    p, s = Settings, ServerSettings
    g = parser.add_argument_group("GPT-Live server")
    g.add_argument("--api-key", "--auth-token", dest="api_key", default=None, metavar="KEY",
                   help="require `Authorization: Bearer KEY` (visible in the process table: prefer "
                        f"--api-key-file or ${auth.ENV_KEYS}; default: no key)")
    g.add_argument("--api-key-file", type=Path, default=None, metavar="FILE",
                   help="accepted keys, one per line (default: none)")
    g.add_argument("--info-events", action="store_true", help="send optional info events (default: off)")
    g.add_argument("--close-grace-ms", type=int, default=default_of(p, "close_grace_ms"),
                   help="after session.close, wait this long for the engine (default: %(default)s)")
    g.add_argument("--usage-period-ms", type=int, default=default_of(p, "usage_period_ms"),
                   help="session time between usage events (default: %(default)s)")
    g.add_argument("--start-timeout-s", type=float, default=default_of(p, "start_timeout_ms") / 1000,
                   help="a start with no answer after this is server_error (default: %(default)s)")
    g.add_argument("--idle-guard-s", type=float, default=default_of(p, "idle_guard_ms") / 1000,
                   help="close a socket with no session after this long idle (default: %(default)s)")
    g.add_argument("--errors-per-s", type=int, default=default_of(p, "errors_per_s"),
                   help="error replies per socket per second; past it the socket is not read until the "
                        "second ends (default: %(default)s)")
    g.add_argument("--outbound-max-frames", type=int, default=default_of(s, "outbound_max_frames"),
                   help="audio frames held for a slow client before dropping it (default: %(default)s)")
    g.add_argument("--outbound-max-bytes", type=int, default=default_of(s, "outbound_max_bytes"),
                   help="bytes of events held for a slow client before dropping it (default: %(default)s)")
    g.add_argument("--header-timeout-s", type=float, default=default_of(s, "header_timeout_s"),
                   help="abort a connection whose request headers are not complete after this "
                        "(default: %(default)s)")
    g.add_argument("--max-connections", type=int, default=default_of(s, "max_connections"),
                   help="open connections on the client port (default: %(default)s)")
    g.add_argument("--max-pending-connections", type=int, default=default_of(s, "max_pending_connections"),
                   help="client-port connections without a finished request; past it the oldest is "
                        "aborted (default: %(default)s)")
    g.add_argument("--admin-host", default=default_of(s, "admin_host"),
                   help="address of the admin listener: /drain, /metrics, /live/stats (default: %(default)s)")
    g.add_argument("--admin-port", type=int, default=default_of(s, "admin_port"),
                   help="port of the admin listener, 0 picks a free one (default: %(default)s)")
    g.add_argument("--ws-ping-interval-s", type=float, default=default_of(s, "ws_ping_interval_s"),
                   help="WebSocket keepalive ping period; no pong within another period aborts the "
                        "socket (default: %(default)s)")
    g.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                   help="serve the client port over TLS with this PEM certificate chain, re-read when it "
                        "changes (with --tls-key; default: plain)")
    g.add_argument("--tls-key", type=Path, default=None, metavar="FILE",
                   help="the certificate's PEM private key (with --tls-cert; default: none)")
    g.add_argument("--no-metrics", action="store_true", help="answer /metrics with 503 (default: served)")
    w = parser.add_argument_group(
        "WebRTC calls", "These need the webrtc extra (`pip install 'liveplex[webrtc]'`): without it an offer is "
        "answered 501, and the flags are only checked.")
    w.add_argument("--webrtc-open-timeout-s", type=float, default=default_of(s, "webrtc_open_timeout_s"),
                   help="a WebRTC call whose caller has not connected and opened its data channel this long "
                        "after the answer is ended (default: %(default)s)")
    w.add_argument("--webrtc-silence-timeout-s", type=float, default=default_of(s, "webrtc_silence_timeout_s"),
                   help="a WebRTC call whose caller sent no audio packet this long is ended (default: %(default)s)")
    w.add_argument("--webrtc-ice-server", action="append", default=[], metavar="URL",
                   help="a STUN or TURN server for WebRTC calls' ICE (stun:, turn:, turns: URL; repeatable; "
                        "default: none, host candidates only)")
    w.add_argument("--webrtc-ice-username", default=None, help="the TURN username (default: none)")
    w.add_argument("--webrtc-ice-password-file", type=Path, default=None, metavar="FILE",
                   help="a file holding the TURN password (default: none)")
    w.add_argument("--webrtc-ice-secret-file", type=Path, default=None, metavar="FILE",
                   help="a file holding the TURN server's shared secret (coturn's static-auth-secret): calls' "
                        "and callers' credentials are minted from it, instead of a username and password "
                        "(default: none)")
    w.add_argument("--webrtc-ice-ttl-s", type=int, default=default_of(s, "webrtc_ice_ttl_s"),
                   help="how long a minted TURN credential is valid (default: %(default)s)")
    w.add_argument("--webrtc-caller-ice-server", action="append", default=[], metavar="URL",
                   help="a STUN or TURN server handed to callers by GET /v1/live/ice_servers, TURN ones with "
                        "a minted credential (needs --webrtc-ice-secret-file; repeatable; default: none)")
    w.add_argument("--webrtc-relay-only", action="store_true",
                   help="answer WebRTC calls with relayed (TURN) candidates only (default: every candidate)")


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerSettings:
    """Build the settings once; raises ValueError naming the bad flag."""
    for flag, value in (("--close-grace-ms", args.close_grace_ms), ("--usage-period-ms", args.usage_period_ms),
                        ("--start-timeout-s", args.start_timeout_s), ("--idle-guard-s", args.idle_guard_s),
                        ("--errors-per-s", args.errors_per_s),
                        ("--outbound-max-frames", args.outbound_max_frames),
                        ("--outbound-max-bytes", args.outbound_max_bytes),
                        ("--header-timeout-s", args.header_timeout_s),
                        ("--max-connections", args.max_connections),
                        ("--max-pending-connections", args.max_pending_connections),
                        ("--ws-ping-interval-s", args.ws_ping_interval_s),
                        ("--webrtc-open-timeout-s", args.webrtc_open_timeout_s),
                        ("--webrtc-silence-timeout-s", args.webrtc_silence_timeout_s),
                        ("--webrtc-ice-ttl-s", args.webrtc_ice_ttl_s)):
        if value <= 0:
            raise ValueError(f"{flag} must be > 0, got {value}")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together: give both or neither")
    if args.tls_cert is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"--tls-cert/--tls-key: cannot load {args.tls_cert} with {args.tls_key}: {exc}") from None
    password = _secret_file("--webrtc-ice-password-file", args.webrtc_ice_password_file)
    secret = _secret_file("--webrtc-ice-secret-file", args.webrtc_ice_secret_file)
    ice.check_urls("--webrtc-ice-server", args.webrtc_ice_server)
    ice.check_urls("--webrtc-caller-ice-server", args.webrtc_caller_ice_server)
    if args.webrtc_relay_only and not any(u.startswith(ice.TURN_SCHEMES) for u in args.webrtc_ice_server):
        raise ValueError("--webrtc-relay-only needs a turn: or turns: --webrtc-ice-server")
    if secret is not None and (password is not None or args.webrtc_ice_username is not None):
        raise ValueError("--webrtc-ice-secret-file mints the TURN credentials: give it without "
                         "--webrtc-ice-username and --webrtc-ice-password-file")
    if secret is None and any(u.startswith(ice.TURN_SCHEMES) for u in args.webrtc_caller_ice_server):
        raise ValueError("--webrtc-caller-ice-server: a turn:/turns: URL needs --webrtc-ice-secret-file "
                         "(callers get minted credentials, never a static password)")
    protocol = Settings(
        info_events=args.info_events,
        close_grace_ms=args.close_grace_ms,
        usage_period_ms=args.usage_period_ms,
        start_timeout_ms=round(args.start_timeout_s * 1000),
        idle_guard_ms=round(args.idle_guard_s * 1000),
        errors_per_s=args.errors_per_s,
    )
    return ServerSettings(
        protocol=protocol,
        api_keys=auth.load_keys(args.api_key, args.api_key_file, environ),
        outbound_max_frames=args.outbound_max_frames,
        outbound_max_bytes=args.outbound_max_bytes,
        header_timeout_s=args.header_timeout_s,
        max_connections=args.max_connections,
        max_pending_connections=args.max_pending_connections,
        admin_host=args.admin_host,
        admin_port=args.admin_port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        ws_ping_interval_s=args.ws_ping_interval_s,
        webrtc_open_timeout_s=args.webrtc_open_timeout_s,
        webrtc_silence_timeout_s=args.webrtc_silence_timeout_s,
        webrtc_ice_servers=tuple(args.webrtc_ice_server),
        webrtc_ice_username=args.webrtc_ice_username,
        webrtc_ice_password=password,
        webrtc_ice_secret=secret,
        webrtc_ice_ttl_s=args.webrtc_ice_ttl_s,
        webrtc_caller_ice_servers=tuple(args.webrtc_caller_ice_server),
        webrtc_relay_only=args.webrtc_relay_only,
        metrics=not args.no_metrics,
    )


def _secret_file(flag: str, path: Path | None) -> str | None:
    """A secret's text from its file (never a flag's value); ValueError naming `flag`."""
    if path is None:
        return None
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"{flag}: cannot read {path}: {exc.strerror}") from None
