"""One level's verdict: pooled figures, the error histogram and whether it was clean (§13.5).

Pure: it turns the sessions' results, the server's `/live/stats` before and after, and the
server's CPU seconds into a `Level` value; the shells print and store it.
"""

from __future__ import annotations

import array
import collections
import dataclasses
from collections.abc import Iterable

import numpy as np

from liveplex import percentiles
from liveplex.bench import caller
from liveplex.live import frames
from liveplex.pod.stats import quantile_upper_s

FRAME_US = frames.FRAME_MS * 1000

UNDERRUN_LIMIT_MS = 1.0
"""A session whose player stalled for more than this has an underrun (performance.md §1)."""

CLIENT_LIMIT_MS = 5.0
"""Send-lateness p99 above this marks the level client-limited, not a server result (§1)."""

ERROR_KEY_CHARS = 80
"""Errors are grouped by their first 80 characters."""

_STATS_COUNTERS = ("ticks", "tick_busy_us", "late_ticks", "underruns", "pauses", "wakes", "refused_wakes")
"""Cumulative `/live/stats` fields whose difference over a level is reported (gpt-live §11);
`underruns`: the callers' dry spells, silence fed to the model (counted as each session closes);
`pauses`, `wakes`, `refused_wakes`: a pausing pod's (docs/pause.md; a refused wake must not happen)."""
_STATS_HISTOGRAMS = ("caller_wait", "tick_lateness", "wake_latency")
"""`/live/stats` histograms whose sum, count and p50 / p99 a run diffs (`server["caller_wait_us"]`,
`..._n`, `..._p50_us`, `..._p99_us`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Level:
    """What one level measured against one server."""

    target: str
    """Which server: "pod" or "baseline-json" / "baseline-raw"."""
    sessions: int
    ok: int
    failed: int
    errors: dict[str, int]
    """Error text (first 80 characters) → sessions that failed with it."""
    clean: bool
    """Every session ok, no player stalled over 1 ms and, if bounded, lateness p99 in bound."""
    client_limited: bool
    """The client's send-lateness p99 exceeded 5 ms: the client, not the server, was the limit."""
    started_ms: percentiles.Summary
    late_ms: percentiles.Summary
    underrun_ms: percentiles.Summary
    send_late_ms: percentiles.Summary
    echo_rtt_ms: percentiles.Summary
    """Caller frame sent to its echo heard, every matched frame pooled (`--echo-rtt`; else empty)."""
    echo_floor_ms: float | None
    """The least echo round trip the server allows (`roundtrip.Floor`), with `--echo-rtt`."""
    first_audio_ms: percentiles.Summary
    """Per session: `session.start` sent to its first audio delta."""
    first_reaction_ms: percentiles.Summary
    """Per session: `session.start` sent to the first audio delta that can carry the model's
    reaction to the caller (the first after the caller's first frame was sent)."""
    echo_underrun_ms: percentiles.Summary
    """Per session: ticks its caller's frame missed (silence echoed between stamps) x 80 ms."""
    echo_lost: percentiles.Summary
    """Per session: caller frames never heard back (dropped: the cap, or delay given back)."""
    pauses: int
    """`session.paused` events the callers heard."""
    wake_ms: percentiles.Summary
    """Per wake, pooled: the caller's speech onset sent to `session.resumed` heard (a talk profile)."""
    pre_roll_ms: percentiles.Summary
    """Per wake, pooled: audio from before the resume that the model heard (a talk profile)."""
    onset_echo_ms: percentiles.Summary
    """Per wake, pooled: the speech onset frame sent to its echo heard; less the echo delay, when
    the model heard the onset (a talk profile, an echoing server)."""
    underrun_sessions: int
    frames: int
    audio_s: float
    server: dict[str, int]
    """Δ of `/live/stats` counters over the level; empty when the server has no such endpoint."""
    cpu_s: float | None
    """Server CPU time (user + system) over the level, when its pid is known."""

    @property
    def echo_above_floor_ms(self) -> dict[str, float] | None:
        """How far the echo round trip's p50 and p99 sit above the floor, when both are known."""
        if self.echo_floor_ms is None or self.echo_rtt_ms.count == 0:
            return None
        return {"p50": round(self.echo_rtt_ms.p50 - self.echo_floor_ms, 3),
                "p99": round(self.echo_rtt_ms.p99 - self.echo_floor_ms, 3)}

    @property
    def budget_ms(self) -> dict[str, float] | None:
        """Where the mean echo round trip above the ideal went, measured (issue 31): the caller
        buffer's wait (each frame from its arrival to its tick's due time, the pod's
        `caller_wait`), the tick's start lateness and its compute (the pod's own figures), and the
        rest, which is the two network legs, both pumps and any pacing. None without the pod's figures."""
        s = self.server
        if (self.echo_floor_ms is None or self.echo_rtt_ms.count == 0 or not s.get("caller_wait_n")
                or not s.get("tick_lateness_n") or not s.get("ticks")):
            return None
        parts = {"buffer_wait": s["caller_wait_us"] / s["caller_wait_n"] / 1000,
                 "tick_lateness": s["tick_lateness_us"] / s["tick_lateness_n"] / 1000,
                 "tick_compute": s["tick_busy_us"] / s["ticks"] / 1000}
        above = self.echo_rtt_ms.mean - self.echo_floor_ms
        return {"above_ideal_mean": round(above, 2), **{k: round(v, 2) for k, v in parts.items()},
                "network_pumps_pacing": round(above - sum(parts.values()), 2)}

    @property
    def cpu_us_per_frame(self) -> float | None:
        """Server CPU µs per frame pair relayed (one frame in, one out)."""
        if self.cpu_s is None or self.frames == 0:
            return None
        return self.cpu_s * 1e6 / self.frames

    def as_dict(self) -> dict[str, object]:
        """The level's entry in the JSON report."""
        out = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        for name, value in out.items():
            if isinstance(value, percentiles.Summary):
                out[name] = value.as_dict()
        out["echo_above_floor_ms"] = self.echo_above_floor_ms
        out["budget_ms"] = self.budget_ms
        out["cpu_us_per_frame"] = self.cpu_us_per_frame
        return out


def judge(
    target: str,
    results: list[caller.CallResult],
    late_p99_ms: float | None,
    stats_before: dict[str, object] | None,
    stats_after: dict[str, object] | None,
    cpu_s: float | None,
    echo_floor_ms: float | None = None,
) -> Level:
    """Pool a level's session results into a `Level`."""
    ok = [r for r in results if r.ok]
    errors = collections.Counter((r.error or "")[:ERROR_KEY_CHARS] for r in results if not r.ok)
    late = percentiles.summarize(_pooled(r.lateness_us for r in results))
    send_late = percentiles.summarize(_pooled(r.send_late_us for r in results))
    underrun_sessions = sum(1 for r in ok if r.underrun_ms > UNDERRUN_LIMIT_MS)
    clean = (
        len(ok) == len(results)
        and underrun_sessions == 0
        and (late_p99_ms is None or late.p99 <= late_p99_ms)
    )
    return Level(
        target=target,
        sessions=len(results),
        ok=len(ok),
        failed=len(results) - len(ok),
        errors=dict(errors.most_common()),
        clean=clean,
        client_limited=send_late.p99 > CLIENT_LIMIT_MS,
        started_ms=percentiles.summarize(
            [round(r.started_ms * 1000) for r in results if r.started_ms is not None]
        ),
        late_ms=late,
        underrun_ms=percentiles.summarize([round(r.underrun_ms * 1000) for r in ok]),
        send_late_ms=send_late,
        echo_rtt_ms=percentiles.summarize(_pooled(r.echo_rtt_us for r in results)),
        echo_floor_ms=echo_floor_ms,
        first_audio_ms=percentiles.summarize(_present(r.since_start_us(r.first_audio_ns) for r in results)),
        first_reaction_ms=percentiles.summarize(_present(r.since_start_us(r.reaction_ns) for r in results)),
        echo_underrun_ms=percentiles.summarize([r.echo_silent * FRAME_US for r in results if r.echo_rtt_us]),
        echo_lost=percentiles.summarize([r.echo_skipped * 1000 for r in results if r.echo_rtt_us]),
        pauses=sum(r.pauses for r in results),
        wake_ms=percentiles.summarize(_pooled_ms(r.wake_ms for r in results)),
        pre_roll_ms=percentiles.summarize(_pooled_ms(r.pre_roll_ms for r in results)),
        onset_echo_ms=percentiles.summarize(_pooled_ms(r.onset_echo_ms for r in results)),
        underrun_sessions=underrun_sessions,
        frames=sum(r.frames for r in results),
        audio_s=round(sum(r.audio_s for r in results), 3),
        server=stats_delta(stats_before, stats_after),
        cpu_s=cpu_s,
    )


def _pooled_ms(parts: Iterable[array.array]) -> list[int]:
    """All sessions' ms figures (float arrays) as integer µs, the unit `percentiles` takes."""
    return [round(v * 1000) for p in parts for v in p]


def _present(values: Iterable[int | None]) -> list[int]:
    return [v for v in values if v is not None]


def stats_delta(
    before: dict[str, object] | None, after: dict[str, object] | None
) -> dict[str, int]:
    """The change of the cumulative `/live/stats` counters, plus `max_sessions` as read after."""
    if not before or not after:
        return {}
    delta = {k: int(after[k]) - int(before[k]) for k in _STATS_COUNTERS  # type: ignore[call-overload]
             if k in before and k in after}
    for name in _STATS_HISTOGRAMS:  # a histogram's sum (µs), count and quantiles over the run
        b, a = before.get(name), after.get(name)
        if isinstance(b, dict) and isinstance(a, dict) and "sum_s" in a and "sum_s" in b:
            counts = [x - y for x, y in zip(a["counts"], b["counts"], strict=True)]
            delta[f"{name}_us"] = round((float(a["sum_s"]) - float(b["sum_s"])) * 1e6)
            delta[f"{name}_n"] = sum(counts)
            for q in (50, 99):  # the bucket's upper bound: one bucket high at most, as a scraper reads it
                delta[f"{name}_p{q}_us"] = round(quantile_upper_s(counts, tuple(a["bounds_s"]), q / 100) * 1e6)
    if "max_sessions" in after:
        delta["max_sessions"] = int(after["max_sessions"])  # type: ignore[call-overload]
    return delta


def largest_clean(levels: list[Level]) -> int | None:
    """The measured capacity: the largest level run clean before the first unclean one."""
    best = None
    for level in levels:
        if not level.clean:
            break
        best = level.sessions
    return best


def _pooled(parts: Iterable[array.array]) -> np.ndarray:
    """All sessions' µs samples (int64 arrays) in one array."""
    arrays = [np.frombuffer(p, dtype=np.int64) for p in parts if len(p)]
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
