"""Gateway settings and the `liveplex gateway` flags that build them (once, naming a bad flag)."""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from liveplex.flags import default_of
from liveplex.gptlive.server import auth
from liveplex.gptlive.server.tls import Tls
from liveplex.placement import keys, timing, url
from liveplex.storage import settings as store_settings
from liveplex.storage.settings import StoreSettings


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """How the gateway places and relays; durations carry their unit."""

    redis_url: str
    default_pool: str | None = None
    """Pool (`ns/name`) of models with no route in `le:routes`."""
    fail_open: bool = True
    """Redis down: place from the last snapshot if it is younger than `snapshot_max_age_ms`
    (the pods' hard caps decide); off: answer `server_busy` (platform §7.12)."""
    snapshot_max_age_ms: int = timing.SNAPSHOT_MAX_AGE_MS
    refresh_ms: int = 1000
    """How often routes, configs and pool snapshots are re-read from Redis."""
    connect_timeout_ms: int = 2000
    """Upstream WebSocket connect budget (platform §7.4)."""
    upstream_silence_ms: int = 1000
    """A relayed session's pod that sends nothing for this long (12 ticks) is treated as gone
    (`watchdog.Watchdog`)."""
    breaker_ms: int = timing.CIRCUIT_BREAKER_MS
    max_sessions_per_key: int = 100
    """Concurrent sessions one API key may hold (keyed gateways only: `quota`); 0: no limit."""
    starts_per_key_per_s: float = 20.0
    """Session starts one API key may make per second, a second's worth banked; 0: no limit."""
    upstream_queue_frames: int = 256
    """Client frames held for a slow upstream before the session is dropped (≈20 s of audio)."""
    drain_deadline_s: float = 600.0
    """`/drain` (and SIGTERM) wait this long for relayed sessions to end."""
    moves_at_once: int = 4
    """Sessions this gateway moves off draining pods at the same time; the others go on where they
    are until their turn. Every move under way lengthens the others' (the caller's audio is held
    from the blob to the switch, and a PersonaPlex target rebuilds imports one at a time), and a
    hold longer than the pod's jitter cap drops the caller's oldest audio."""
    pod_key: str | None = None
    """The bearer key this gateway presents to pods (the installation's pod token: pods take
    sessions only from gateways); None: pods that need no key."""
    upstream_ca: Path | None = None
    """The CA bundle that signed the pods' certificates: every pod is dialed over TLS (the pods run
    with `--tls-cert`/`--tls-key`); None: plain `ws://`."""
    upstream_server_name: str | None = None
    """The name the pods' certificates carry (one certificate for all pods); None: each pod's IP."""
    peer_url: str | None = None
    """Where the other replicas reach this gateway's client port (`ws://POD_IP:PORT`, or
    `wss://` when it serves TLS): the WebRTC calls it holds are recorded in Redis with it, and a
    sideband attach for one of them arriving at another replica is relayed here
    (`gateway.calls`); None: one replica, nothing recorded."""
    peer_ca: Path | None = None
    """The CA bundle the replicas' serving certificate chains to, trusted when relaying to a
    `wss://` peer URL; None: the system's CAs."""
    peer_server_name: str | None = None
    """The name the replicas' certificate carries, checked when relaying to a `wss://` peer URL
    (they are dialed by IP); None: the peer URL's host."""
    store: StoreSettings = StoreSettings()
    """Where stored calls (`store: true`) go (docs/storage.md); none: `store: true` is refused."""

    def peer_tls(self, serves_tls: bool) -> Tls | None:
        """How this replica dials the others, which serve as it does (`wss://` when it serves TLS:
        `--tls-cert`); raises ValueError naming `--peer-url` when its scheme says otherwise."""
        if self.peer_url is None:
            return None
        if self.peer_url.startswith("wss://") != serves_tls:
            raise ValueError(f"--peer-url must be {'wss' if serves_tls else 'ws'}:// (this gateway serves "
                             f"{'TLS' if serves_tls else 'plain WebSockets'}), got {self.peer_url!r}")
        return Tls.trusting(self.peer_ca, self.peer_server_name) if serves_tls else None


POD_KEY_ENV = "LIVEPLEX_POD_KEY"
"""The pod token, when `--pod-key-file` is not given."""


def load_pod_key(key_file: Path | None, environ: Mapping[str, str]) -> str | None:
    """The pod token from `--pod-key-file` (its first line), else `$LIVEPLEX_POD_KEY`; raises
    ValueError naming the flag when it cannot be read or is no bearer token."""
    if key_file is not None:
        try:
            key = key_file.read_text().strip()
        except OSError as exc:
            raise ValueError(f"--pod-key-file: cannot read {key_file}: {exc.strerror}") from exc
        source = "--pod-key-file"
    else:
        key, source = environ.get(POD_KEY_ENV, "").strip(), f"${POD_KEY_ENV}"
    if not key:
        return None
    if not auth.well_formed(key):
        raise ValueError(f"{source}: the pod key is not printable ASCII without spaces (a bearer token)")
    return key


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = GatewaySettings
    g = parser.add_argument_group("gateway")
    g.add_argument("--redis-url", default=None,
                   help=f"the placement Redis (default: ${url.REDIS_URL_ENV}, which keeps a password out of "
                        "the process list; one of them is required)")
    g.add_argument("--pool", default=None, metavar="NS/NAME",
                   help="pool of models that have no route (default: routed models only)")
    g.add_argument("--fail-closed", action="store_true",
                   help="Redis down: answer server_busy instead of placing from the last snapshot "
                        "(default: fail open)")
    g.add_argument("--connect-timeout-ms", type=int, default=default_of(d, "connect_timeout_ms"),
                   help="upstream connect budget (default: %(default)s)")
    g.add_argument("--upstream-silence-ms", type=int, default=default_of(d, "upstream_silence_ms"),
                   help="a session's pod silent this long is treated as gone (default: %(default)s)")
    g.add_argument("--max-sessions-per-key", type=int, default=default_of(d, "max_sessions_per_key"),
                   help="concurrent sessions per API key, 0 = unlimited (default: %(default)s)")
    g.add_argument("--starts-per-key-per-s", type=float, default=default_of(d, "starts_per_key_per_s"),
                   help="session starts per API key per second, 0 = unlimited (default: %(default)s)")
    g.add_argument("--pod-key-file", type=Path, default=None, metavar="FILE",
                   help=f"the bearer key presented to pods (the pods' --api-key-file; default: ${POD_KEY_ENV}, "
                        "else none)")
    g.add_argument("--upstream-ca", type=Path, default=None, metavar="FILE",
                   help="dial pods over TLS, trusting this PEM CA bundle (pods run with --tls-cert/--tls-key; "
                        "default: plain)")
    g.add_argument("--upstream-server-name", default=None, metavar="NAME",
                   help="the name the pods' certificates carry (with --upstream-ca; default: each pod's IP)")
    g.add_argument("--drain-deadline-s", type=float, default=default_of(d, "drain_deadline_s"),
                   help="how long /drain and SIGTERM wait for sessions (default: %(default)s)")
    g.add_argument("--peer-url", default=None, metavar="URL",
                   help="ws:// or wss:// URL at which the other gateway replicas reach this one's client port: a "
                        "sideband attach for a WebRTC call held here is relayed here (default: none, one replica)")
    g.add_argument("--peer-ca", type=Path, default=None, metavar="FILE",
                   help="with a wss:// --peer-url: the PEM CA bundle the replicas' certificate chains to "
                        "(default: the system's CAs)")
    g.add_argument("--peer-server-name", default=None, metavar="NAME",
                   help="with a wss:// --peer-url: the name the replicas' certificate carries, checked "
                        "instead of their address (default: the --peer-url's host)")
    g.add_argument("--moves-at-once", type=int, default=default_of(d, "moves_at_once"),
                   help="sessions moved off draining pods at the same time (default: %(default)s)")
    store_settings.add_arguments(parser)


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> GatewaySettings:
    redis_url = url.redis_url(args.redis_url, environ)
    if redis_url is None:
        raise ValueError(f"--redis-url or ${url.REDIS_URL_ENV} is required")
    if args.pool is not None:
        try:
            keys.pool_keys(args.pool)
        except ValueError as exc:
            raise ValueError(f"--pool: {exc}") from exc
    for flag, value in (("--connect-timeout-ms", args.connect_timeout_ms),
                        ("--upstream-silence-ms", args.upstream_silence_ms)):
        if value <= 0:
            raise ValueError(f"{flag} must be > 0, got {value}")
    if args.moves_at_once <= 0:
        raise ValueError(f"--moves-at-once must be > 0, got {args.moves_at_once}")
    if args.max_sessions_per_key < 0:
        raise ValueError(f"--max-sessions-per-key must be >= 0, got {args.max_sessions_per_key}")
    if not args.starts_per_key_per_s >= 0:
        raise ValueError(f"--starts-per-key-per-s must be >= 0, got {args.starts_per_key_per_s}")
    if args.drain_deadline_s < 0:
        raise ValueError(f"--drain-deadline-s must be >= 0, got {args.drain_deadline_s}")
    if args.upstream_server_name is not None and args.upstream_ca is None:
        raise ValueError("--upstream-server-name needs --upstream-ca")
    if args.peer_url is not None and not args.peer_url.startswith(("ws://", "wss://")):
        raise ValueError(f"--peer-url must be a ws:// or wss:// URL, got {args.peer_url!r}")
    for flag, value in (("--peer-ca", args.peer_ca), ("--peer-server-name", args.peer_server_name)):
        if value is not None and (args.peer_url is None or not args.peer_url.startswith("wss://")):
            raise ValueError(f"{flag} needs a wss:// --peer-url")
    for flag, ca in (("--upstream-ca", args.upstream_ca), ("--peer-ca", args.peer_ca)):
        if ca is not None:
            try:
                Tls.trusting(ca)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"{flag}: cannot load {ca}: {exc}") from None
    return GatewaySettings(
        redis_url=redis_url, default_pool=args.pool, fail_open=not args.fail_closed,
        connect_timeout_ms=args.connect_timeout_ms, upstream_silence_ms=args.upstream_silence_ms,
        max_sessions_per_key=args.max_sessions_per_key, starts_per_key_per_s=args.starts_per_key_per_s,
        drain_deadline_s=args.drain_deadline_s, moves_at_once=args.moves_at_once,
        pod_key=load_pod_key(args.pod_key_file, environ),
        upstream_ca=args.upstream_ca, upstream_server_name=args.upstream_server_name, peer_url=args.peer_url,
        peer_ca=args.peer_ca, peer_server_name=args.peer_server_name,
        store=store_settings.settings_from_args(args),
    )
