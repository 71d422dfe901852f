"""The sim engine's settings: the live contract's shape plus the echo and the cost curve.

live-contract §12.1. Built once per process (from the CLI) and trusted afterwards.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from liveplex.live import contract, frames, groups
from liveplex.personaplex import voice_names

TICK_GROUPS: tuple[int, ...] = (1, 2, 4, 5, 8)
"""Group counts that divide the 80 ms period into whole milliseconds."""
AUTO = 0
"""`tick_groups` 0: as many groups as the modeled tick leaves room for, up to 4, by PersonaPlex's
rule (`live.groups.choose` over `cost_us`), so the platform path of a varying G runs in CI."""


@dataclass(frozen=True, slots=True)
class SimProfile:
    """What the sim serves and how it behaves."""

    model: str = "liveplex-sim"
    """Served model id."""
    max_sessions: int = 64
    """Admission cap; one more start is answered `server_busy`."""
    max_seconds: float = 240.0
    """Session length, seconds; floored to whole 80 ms frames (240 s -> 3000)."""
    jitter_frames: int = 4
    """Jitter buffer cap, frames (320 ms): older caller audio is dropped past it."""
    prebuffer_frames: int = 0
    """Frames buffered before playout starts; 0: adaptive (`live/playout.py`), the default."""
    tick_groups: int = 4
    """Tick groups within a period (`live/drive.py`): a caller's frame waits at most 20 ms for its
    tick instead of 80 (docs/bench.md, "Latency")."""
    echo_frames: int = 6
    """How late the echo plays the caller back, frames (480 ms)."""
    word_frames: int = 6
    """Loud frames per spoken word (480 ms of speech)."""
    tick_base_us: int = 0
    """Emulated compute per tick, µs, whatever the batch."""
    tick_per_session_us: int = 0
    """Emulated compute per session per tick, µs (2000 + 3000 fits 26 sessions in 80 ms)."""
    default_instructions: str = "You echo the caller."
    max_instructions_chars: int = 4096

    def __post_init__(self) -> None:
        checks = {
            "max_sessions": self.max_sessions > 0,
            "max_seconds": self.max_seconds > 0,
            "jitter_frames": self.jitter_frames > 0,
            "prebuffer_frames": 0 <= self.prebuffer_frames <= self.jitter_frames,
            "tick_groups": self.tick_groups in (AUTO, *TICK_GROUPS),
            "echo_frames": self.echo_frames >= 0,
            "word_frames": self.word_frames > 0,
            "tick_base_us": self.tick_base_us >= 0,
            "tick_per_session_us": self.tick_per_session_us >= 0,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid sim setting {bad[0]}={getattr(self, bad[0])!r}"
                             + (" (must lie in 0..jitter_frames)" if bad[0] == "prebuffer_frames" else "")
                             + (f" (one of {(AUTO, *TICK_GROUPS)})" if bad[0] == "tick_groups" else ""))

    def info(self) -> contract.LiveInfo:
        period_ns = frames.PERIOD_NS
        return contract.LiveInfo(
            model=self.model,
            sample_rate=frames.SAMPLE_RATE,
            frame_samples=frames.FRAME_SAMPLES,
            voices=voice_names.VOICES,  # PersonaPlex's, so one voice table fits both engines
            default_voice=voice_names.DEFAULT_VOICE,
            default_instructions=self.default_instructions,
            max_instructions_chars=self.max_instructions_chars,
            max_sessions=self.max_sessions,
            max_frames=int(self.max_seconds * 1e9) // period_ns,
            tick_groups=self.most_groups,
            # published in /live/config, so a client knows what holds its audio back (the bench's echo floor)
            engine=(("prebuffer_frames", str(self.prebuffer_frames)), ("echo_frames", str(self.echo_frames))),
        )

    @property
    def most_groups(self) -> int:
        """The sub-ticks a period is cut into: `tick_groups`, or the most `AUTO` chooses."""
        return self.tick_groups or groups.CHOICES[-1]

    def step_s(self, rows: int) -> float:
        """A modeled step of `rows` rows, seconds: what `live.groups.choose` weighs."""
        return self.cost_us(rows) / 1e6

    def cost_us(self, sessions: int) -> int:
        """Emulated tick compute for `sessions` sessions, µs."""
        return self.tick_base_us + self.tick_per_session_us * sessions


def add_arguments(parser: argparse.ArgumentParser) -> tuple[argparse.Action, ...]:
    """The engine flags of `liveplex serve`: first those both engines read (the PersonaPlex engine
    reads them from the same namespace), then the sim's own, which it returns so that a run with
    another engine can say it ignores them."""
    d = SimProfile()
    shared = parser.add_argument_group("engine (sim and personaplex)")
    shared.add_argument("--max-sessions", type=int, default=None, metavar="N",
                        help=f"admission cap (default: sim {d.max_sessions}; personaplex: what the device "
                             "memory holds)")
    shared.add_argument("--max-seconds", type=float, default=d.max_seconds,
                        help="session length, s; personaplex: 0 = unlimited (default: %(default)s)")
    shared.add_argument("--jitter-frames", type=int, default=d.jitter_frames,
                        help="jitter buffer cap, 80 ms frames (default: %(default)s)")
    shared.add_argument("--prebuffer-frames", type=int, default=d.prebuffer_frames,
                        help="frames buffered before playout starts; 0 = adaptive, from each caller's measured "
                             "jitter (default: %(default)s)")
    shared.add_argument("--tick-groups", type=int, default=None, choices=(AUTO, *TICK_GROUPS),
                        help="session groups ticked at offsets within the 80 ms period; 0 = as many as the "
                             f"(sim: modeled, personaplex: measured) tick leaves room for, up to 4 (default: sim "
                             f"{d.tick_groups}, personaplex 0; personaplex takes 0, 1, 2 or 4)")
    shared.add_argument("--fail-after-ticks", type=int, default=0,
                        help="fault injection: the tick raises after N ticks (default: %(default)s = never)")
    sim = parser.add_argument_group("sim engine")
    return (
        sim.add_argument("--model", default=None, help=f"served model id (default: {d.model})"),
        sim.add_argument("--echo-frames", type=int, default=d.echo_frames,
                         help="how late the echo plays the caller back, frames (default: %(default)s)"),
        sim.add_argument("--tick-base-us", type=int, default=d.tick_base_us,
                         help="emulated compute per tick, µs (default: %(default)s)"),
        sim.add_argument("--tick-per-session-us", type=int, default=d.tick_per_session_us,
                         help="emulated compute per session per tick, µs (default: %(default)s)"),
    )


def profile_from_args(args: argparse.Namespace) -> SimProfile:
    d = SimProfile()
    return SimProfile(
        model=args.model or d.model,
        max_sessions=d.max_sessions if args.max_sessions is None else args.max_sessions,
        max_seconds=args.max_seconds,
        jitter_frames=args.jitter_frames,
        prebuffer_frames=args.prebuffer_frames,
        tick_groups=d.tick_groups if args.tick_groups is None else args.tick_groups,
        echo_frames=args.echo_frames,
        tick_base_us=args.tick_base_us,
        tick_per_session_us=args.tick_per_session_us,
    )
