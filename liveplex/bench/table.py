"""The bench's stdout: one block per level and the capacity lines (live-contract §13.5)."""

from __future__ import annotations

from liveplex import percentiles
from liveplex.bench import level as level_mod


def render_level(level: level_mod.Level) -> str:
    """The block printed after each level."""
    verdict = "clean" if level.clean else "NOT clean"
    lines = [f"[{level.target}] {level.sessions} sessions: ok {level.ok} failed {level.failed}"
             f" · {verdict}" + (" · CLIENT-LIMITED" if level.client_limited else "")]
    lines += [f"  {count} x {error}" for error, count in level.errors.items()]
    lines.append(f"  {'':<14}{'mean':>8}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>9}")
    rows = [("started ms", level.started_ms), ("first audio", level.first_audio_ms),
            ("first reaction", level.first_reaction_ms), ("late ms", level.late_ms),
            ("underrun ms", level.underrun_ms), ("send late ms", level.send_late_ms)]
    if level.echo_floor_ms is not None:
        rows += [("echo rtt ms", level.echo_rtt_ms), ("caller dry ms", level.echo_underrun_ms),
                 ("caller lost", level.echo_lost)]
    if level.wake_ms.count or level.pre_roll_ms.count:
        rows += [("wake ms", level.wake_ms), ("onset echo ms", level.onset_echo_ms), ("pre-roll ms", level.pre_roll_ms)]
    for name, summary in rows:
        lines.append(f"  {name:<14}{_row(summary)}")
    if level.echo_floor_ms is not None:
        lines.append("  " + render_echo(level))
    lines.append(f"  frames {level.frames} ({level.audio_s:.1f} audio-s), sessions with underrun "
                 f"> {level_mod.UNDERRUN_LIMIT_MS:g} ms: {level.underrun_sessions}")
    if level.pauses:
        lines.append(f"  pauses heard {level.pauses}, wakes timed {level.wake_ms.count}")
    if level.cpu_us_per_frame is not None:
        lines.append(f"  server CPU {level.cpu_s:.2f} s, {level.cpu_us_per_frame:.1f} µs per frame pair")
    if level.server:
        lines.append("  server " + " ".join(f"{k} {v}" for k, v in level.server.items()))
    return "\n".join(lines)


def render_echo(level: level_mod.Level) -> str:
    """The echo round trip against its floor (`--echo-rtt`)."""
    above = level.echo_above_floor_ms
    if above is None:
        return (f"echo ideal {level.echo_floor_ms:g} ms; no echo matched a sent frame "
                "(the server does not play the caller's audio back untouched)")
    return (f"echo ideal {level.echo_floor_ms:g} ms: p50 {above['p50']:+.1f} ms, p99 {above['p99']:+.1f} ms "
            f"above it ({level.echo_rtt_ms.count} frames)")


def render_capacity(target: str, capacity: int | None) -> str:
    """The ramp's answer for one server."""
    return f"[{target}] largest clean level: {capacity if capacity is not None else 'none'}"


def _row(summary: percentiles.Summary) -> str:
    return (f"{summary.mean:>8.2f}{summary.p50:>8.2f}{summary.p90:>8.2f}"
            f"{summary.p99:>8.2f}{summary.max:>9.2f}")
