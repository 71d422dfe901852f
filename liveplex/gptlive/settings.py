"""Front-end settings: one frozen value, built once from the command line (style rule 6).

`add_arguments` and `settings_from_args` let `liveplex serve` compose these flags with the engine's.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from liveplex.gptlive import voices

STATIC_DIR = Path(__file__).parent / "static"


@dataclass(frozen=True, slots=True)
class Settings:
    """How the GPT-Live front end behaves; every duration carries its unit."""

    model_aliases: tuple[str, ...] = ("gpt-live-1",)
    """Model names accepted besides the engine's own id (gpt-live §5.1's allow-list)."""
    auth_token: str | None = None
    """When set, the socket and `/v1/*` need `Authorization: Bearer <token>`; else 401."""
    info_events: bool = False
    """Send the optional `info` events (voice_mapped, default_instructions) after start."""
    voice_dir: Path | None = None
    """Registry of custom voices (`<id>.pt`), for `{"id": ...}` voices."""
    builtin_voices: Mapping[str, str] = field(default_factory=lambda: dict(voices.BUILTIN))
    """OpenAI built-in voice name -> native name."""
    close_grace_ms: int = 2_000
    """After `session.close`, how long to wait for the engine before closing anyway."""
    usage_period_ms: int = 5_000
    """Session time between `session.usage.updated` events."""
    start_timeout_ms: int = 30_000
    """A pending start with no answer from the engine after this gets `server_error`."""
    idle_guard_ms: int = 60_000
    """With no session, close the socket after this long without a client message."""
    outbound_max_frames: int = 64
    """Audio frames queued for a slow client (≈5 s) before it is treated as gone."""
    sweep_ms: int = 50
    """Period of the one shared timer that fires idle, start and grace deadlines."""
    metrics: bool = True
    """Serve `/metrics`; 503 when off."""
    static_dir: Path = STATIC_DIR
    """The demo page's files, served at `/` and `/static/`."""

    def __post_init__(self) -> None:
        for name in ("close_grace_ms", "usage_period_ms", "start_timeout_ms", "idle_guard_ms",
                     "outbound_max_frames", "sweep_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The front end's flags; the engine adds its own."""
    g = parser.add_argument_group("GPT-Live front end")
    g.add_argument("--model-alias", action="append", default=None, metavar="NAME",
                   help="model name accepted besides the engine's id (repeatable; "
                        "default: gpt-live-1)")
    g.add_argument("--auth-token", default=None, help="require this bearer token (default: off)")
    g.add_argument("--info-events", action="store_true", help="send optional info events")
    g.add_argument("--voice-dir", type=Path, default=None,
                   help="directory of custom voices <id>.pt for {\"id\": ...} voices")
    g.add_argument("--voice-map", type=Path, default=None,
                   help="JSON file mapping OpenAI voice names to native names (replaces the table)")
    g.add_argument("--close-grace-ms", type=int, default=2_000)
    g.add_argument("--usage-period-ms", type=int, default=5_000)
    g.add_argument("--start-timeout-s", type=float, default=30.0)
    g.add_argument("--idle-guard-s", type=float, default=60.0)
    g.add_argument("--outbound-max-frames", type=int, default=64)
    g.add_argument("--no-metrics", action="store_true", help="answer /metrics with 503")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Build the settings once; raises ValueError naming the bad flag."""
    builtin: Mapping[str, str] = dict(voices.BUILTIN)
    if args.voice_map is not None:
        try:
            loaded = orjson.loads(args.voice_map.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"--voice-map: cannot read {args.voice_map}: {exc}") from exc
        if not isinstance(loaded, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()):
            raise ValueError("--voice-map: expected a JSON object of name -> native name")
        builtin = loaded
    if args.voice_dir is not None and not args.voice_dir.is_dir():
        raise ValueError(f"--voice-dir: {args.voice_dir} is not a directory")
    return Settings(
        model_aliases=tuple(args.model_alias) if args.model_alias else ("gpt-live-1",),
        auth_token=args.auth_token or None,
        info_events=args.info_events,
        voice_dir=args.voice_dir,
        builtin_voices=builtin,
        close_grace_ms=args.close_grace_ms,
        usage_period_ms=args.usage_period_ms,
        start_timeout_ms=round(args.start_timeout_s * 1000),
        idle_guard_ms=round(args.idle_guard_s * 1000),
        outbound_max_frames=args.outbound_max_frames,
        metrics=not args.no_metrics,
    )
