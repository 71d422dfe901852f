"""Pod settings: what a pod serves besides its engine, where it publishes its load, how it drains.

Built once by `settings_from_args`, which raises ValueError naming the bad flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from liveplex.flags import default_of
from liveplex.gptlive import events, voices
from liveplex.gptlive.served import DEFAULT_ALIASES
from liveplex.live import frames, pacing
from liveplex.live.pacing import Pacing
from liveplex.placement import subpools, url
from liveplex.pod import stats
from liveplex.pod.pause import PauseSettings

MAX_REATTACH_GRACE_S = 300.0
"""A parked session holds its slot: five minutes is past any reconnect, and bounds what callers who
never come back can hold."""


@dataclass(frozen=True, slots=True)
class PodSettings:
    """See the module docstring; the Redis fields are all set or all unset."""

    model_aliases: tuple[str, ...] = DEFAULT_ALIASES
    """Model names accepted besides the engine's own id (gpt-live §5.1's allow-list)."""
    voice_dir: Path | None = None
    """Registry of custom voices (`<id>.pt`), for `{"id": ...}` voices."""
    builtin_voices: Mapping[str, str] = field(default_factory=lambda: dict(voices.BUILTIN))
    """OpenAI built-in voice name -> native name."""
    redis_url: str | None = None
    """Where the pool's placement state lives; None: a standalone pod."""
    pool: str | None = None
    """`<namespace>/<name>` of the LiveEngine this pod serves."""
    subpools: int = 1
    """How many sub-pools the pool is split into (Redis Cluster, `placement.subpools`): the pod
    heartbeats into `subpools.of(pool, pod_name, subpools)`; 1: the pool itself."""
    advertise: str | None = None
    """The `ws://host:port` the gateway dials to reach this pod."""
    pod_name: str | None = None
    """This pod's member name in the pool; defaults to the advertised address."""
    drain_deadline_s: float = 600.0
    """`/drain` (and SIGTERM) wait this long for sessions to end before ending them."""
    lateness_budget_ms: int = stats.LATENESS_BUDGET_MS
    """A tick later than this counts in `liveplex_engine_ticks_late_total` and marks the pod degraded."""
    pace_lead_ms: float = 0.0
    """A tick's frames leave this long after the tick is due, or when computed if later
    (`live.pacing`): tick jitter shorter than it becomes a constant delay."""
    pace_spread_ms: float = 0.0
    """...in waves `pacing.STEP_NS` apart over this long (0: one burst)."""
    reattach_grace_s: float = 15.0
    """How long a session a gateway relays keeps running once its socket dropped without the
    caller's end (its gateway died or rolled): its caller may re-attach meanwhile through any
    gateway (docs/continuity.md "Re-attach"); then it ends as before. 0: it ends at once. The
    default covers an SDK's reconnect (0.4-1.5 s) many times over, and a slot held that long by a
    caller who never comes back costs the pool less than a dropped call costs its caller."""
    pause: PauseSettings = field(default_factory=PauseSettings)
    """The idle pause of WebSocket sessions, a liveplex extension (docs/pause.md); off by default."""

    @property
    def pacing(self) -> Pacing:
        return Pacing(round(self.pace_lead_ms * 1e6), round(self.pace_spread_ms * 1e6))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = PodSettings
    g = parser.add_argument_group("pod")
    g.add_argument("--model-alias", action="append", default=None, metavar="NAME",
                   help="model name accepted besides the engine's id (repeatable; default: "
                        + " and ".join(DEFAULT_ALIASES) + ")")
    g.add_argument("--voice-dir", type=Path, default=None,
                   help="directory of custom voices <id>.pt for {\"id\": ...} voices (default: none)")
    g.add_argument("--voice-map", type=Path, default=None,
                   help="JSON file mapping OpenAI voice names to native names (default: the built-in table)")
    g.add_argument("--redis-url", default=None,
                   help=f"publish load to this Redis for a gateway; with --pool, ${url.REDIS_URL_ENV} is "
                        "read when this is not given (default: standalone)")
    g.add_argument("--pool", default=None, metavar="NS/NAME",
                   help="the pool (LiveEngine) this pod belongs to; with --redis-url (default: none)")
    g.add_argument("--subpools", type=int, default=default_of(d, "subpools"), metavar="N",
                   help="the pool is split into N sub-pools (Redis Cluster); the pod joins the one its name "
                        "hashes to (default: %(default)s, not split)")
    g.add_argument("--advertise", default=None, metavar="URL",
                   help="ws://host:port the gateway dials; with --redis-url (default: the bound address)")
    g.add_argument("--pod-name", default=None, help="member name in the pool (default: from --advertise)")
    g.add_argument("--drain-deadline-s", type=float, default=default_of(d, "drain_deadline_s"),
                   help="how long /drain and SIGTERM wait for sessions (default: %(default)s)")
    g.add_argument("--lateness-budget-ms", type=int, default=default_of(d, "lateness_budget_ms"),
                   help="ticks later than this are late (default: %(default)s)")
    g.add_argument("--pace-lead-ms", type=float, default=default_of(d, "pace_lead_ms"),
                   help="a tick's frames leave this long after it is due, or once computed if later "
                        "(default: %(default)s)")
    g.add_argument("--reattach-grace-s", type=float, default=default_of(d, "reattach_grace_s"), metavar="S",
                   help="a relayed session whose gateway's socket dropped keeps running this long for its caller "
                        "to re-attach through any gateway; 0: it ends at once (default: %(default)s)")
    p = PauseSettings
    g.add_argument("--idle-pause-s", type=int, default=default_of(p, "idle_timeout_s"), metavar="N",
                   help="a WebSocket session whose caller and model were silent N whole seconds leaves the "
                        "engine's batch until its caller speaks (docs/pause.md; needs the pause extra); "
                        "0: never (default: %(default)s)")
    g.add_argument("--vad-threshold", type=float, default=default_of(p, "vad_threshold"), metavar="X",
                   help="speech probability (0..1) that wakes a paused session (default: %(default)s)")
    g.add_argument("--wake-reserve", type=int, default=default_of(p, "wake_reserve"), metavar="K",
                   help="engine slots kept free for wakes, one per paused session up to K (default: %(default)s)")
    g.add_argument("--max-paused", type=int, default=default_of(p, "max_paused"), metavar="N",
                   help="sessions held paused at most (the host budget) (default: %(default)s)")
    g.add_argument("--pause-host-budget-bytes", type=int, default=default_of(p, "host_budget_bytes"), metavar="B",
                   help="host memory the paused sessions' state may hold, bytes: a pause past it keeps its "
                        "session in the batch, and the pod admits no more than it can pause; 0: no bound but "
                        "--max-paused (default: %(default)s)")
    g.add_argument("--pace-spread-ms", type=float, default=default_of(d, "pace_spread_ms"),
                   help=f"...in waves {pacing.STEP_NS // 1_000_000} ms apart over this long; 0: one burst "
                        "(default: %(default)s)")


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> PodSettings:
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
    redis_url = url.redis_url(args.redis_url, environ if args.pool else {})  # standalone ignores the env
    if (args.pool or args.advertise) and not redis_url:
        raise ValueError(f"--pool and --advertise need --redis-url (or ${url.REDIS_URL_ENV})")
    if redis_url and not args.pool:
        raise ValueError("--redis-url needs --pool NS/NAME")
    if not 1 <= args.subpools <= subpools.MAX_SUBPOOLS:
        raise ValueError(f"--subpools must lie in [1, {subpools.MAX_SUBPOOLS}], got {args.subpools}")
    if args.drain_deadline_s < 0:
        raise ValueError(f"--drain-deadline-s must be >= 0, got {args.drain_deadline_s}")
    if not 0 <= args.reattach_grace_s <= MAX_REATTACH_GRACE_S:
        raise ValueError(f"--reattach-grace-s must lie in [0, {MAX_REATTACH_GRACE_S:g}], got {args.reattach_grace_s}")
    if args.idle_pause_s:
        bad = events.wake_bounds(args.vad_threshold, args.idle_pause_s)
        if bad is not None:
            flag, value = (("--vad-threshold", args.vad_threshold) if bad[0] == "vad_threshold"
                           else ("--idle-pause-s", args.idle_pause_s))
            raise ValueError(f"{flag} must be {bad[1]}, got {value}")
    if args.idle_pause_s < 0 or args.wake_reserve < 0 or args.max_paused < 0 or args.pause_host_budget_bytes < 0:
        raise ValueError("--idle-pause-s, --wake-reserve, --max-paused and --pause-host-budget-bytes must be >= 0")
    if args.lateness_budget_ms <= 0:
        raise ValueError(f"--lateness-budget-ms must be > 0, got {args.lateness_budget_ms}")
    for flag, value in (("--pace-lead-ms", args.pace_lead_ms), ("--pace-spread-ms", args.pace_spread_ms)):
        if not 0 <= value < frames.FRAME_MS:
            raise ValueError(f"{flag} must lie in [0, {frames.FRAME_MS}), got {value}")
    if args.pace_lead_ms + args.pace_spread_ms >= frames.FRAME_MS:
        raise ValueError(f"--pace-lead-ms + --pace-spread-ms must be < {frames.FRAME_MS} (one tick), got "
                         f"{args.pace_lead_ms + args.pace_spread_ms}")
    return PodSettings(
        model_aliases=tuple(args.model_alias) if args.model_alias else default_of(PodSettings, "model_aliases"),
        voice_dir=args.voice_dir, builtin_voices=builtin, redis_url=redis_url, pool=args.pool,
        subpools=args.subpools, advertise=args.advertise, pod_name=args.pod_name,
        drain_deadline_s=args.drain_deadline_s,
        lateness_budget_ms=args.lateness_budget_ms, pace_lead_ms=args.pace_lead_ms,
        pace_spread_ms=args.pace_spread_ms, reattach_grace_s=args.reattach_grace_s,
        pause=PauseSettings(args.idle_pause_s, args.vad_threshold, args.wake_reserve, args.max_paused,
                            args.pause_host_budget_bytes),
    )
