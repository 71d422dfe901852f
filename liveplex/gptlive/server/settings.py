"""Server-layer settings shared by pods and the gateway, and the flags that build them.

Each flag's default is read from the settings dataclass (`default_of`), so a default is written
once. `settings_from_args` is the one place these flags become values; it raises ValueError
naming the bad flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from liveplex.flags import default_of
from liveplex.gptlive.server import auth
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
    sweep_ms: int = 50
    """Period of the one shared timer that fires idle, start and grace deadlines."""
    metrics: bool = True
    """Serve `/metrics`; 503 when off."""
    static_dir: Path = STATIC_DIR
    """The demo page's files, served at `/` and `/static/`."""

    def __post_init__(self) -> None:
        for name in ("outbound_max_frames", "sweep_ms"):
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
    g.add_argument("--outbound-max-frames", type=int, default=default_of(s, "outbound_max_frames"),
                   help="audio frames held for a slow client before dropping it (default: %(default)s)")
    g.add_argument("--no-metrics", action="store_true", help="answer /metrics with 503 (default: served)")


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerSettings:
    """Build the settings once; raises ValueError naming the bad flag."""
    for flag, value in (("--close-grace-ms", args.close_grace_ms), ("--usage-period-ms", args.usage_period_ms),
                        ("--start-timeout-s", args.start_timeout_s), ("--idle-guard-s", args.idle_guard_s),
                        ("--outbound-max-frames", args.outbound_max_frames)):
        if value <= 0:
            raise ValueError(f"{flag} must be > 0, got {value}")
    protocol = Settings(
        info_events=args.info_events,
        close_grace_ms=args.close_grace_ms,
        usage_period_ms=args.usage_period_ms,
        start_timeout_ms=round(args.start_timeout_s * 1000),
        idle_guard_ms=round(args.idle_guard_s * 1000),
    )
    return ServerSettings(
        protocol=protocol,
        api_keys=auth.load_keys(args.api_key, args.api_key_file, environ),
        outbound_max_frames=args.outbound_max_frames,
        metrics=not args.no_metrics,
    )
