"""How many tick groups a period has room for (issue 44), and what a change of that number means.

G groups cut a caller's wait for its tick from up to a period to up to a period / G, but each group
is a step of its own: a batched model reads all its weights once a step, so G groups cost G steps
of B / G rows a period instead of one of B (docs/engine_pod.md, "Tick groups"). So G is not a
constant: `choose` takes the largest G whose steps, measured per bucket, plus the prefill the period
owes, fit the period without a turn starting later than the margin the pod is judged by; `Hold`
keeps it from flapping as sessions come and go; `phases` and `regroup` say where each group's turn
lies within the `most` sub-ticks the drive loop runs and where a session goes when G changes. The
PersonaPlex engine runs it on its measured steps, the sim on its modeled costs. Pure: no clock.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

CHOICES: tuple[int, ...] = (1, 2, 4)
"""The group counts a varying engine picks from: each divides the most (4), so every group's turn
is one of the drive loop's sub-ticks."""
LATE_MARGIN_S = 0.010
"""The lateness a pod is judged clean by (capacity: sessions at lateness p99 <= 10 ms)."""
UP_PERIODS = 25
"""Periods (2 s) a larger G must keep fitting before the engine takes it: a regroup moves sessions,
so a newcomer's prefill or a session ending must not make G flap. A smaller G is taken at once."""
SEEN_STEPS = 25
"""Steps run at a bucket whose median `Steps` weighs, once it has `TRUST_STEPS` of them."""
TRUST_STEPS = 5


@dataclass(frozen=True, slots=True)
class Choice:
    """The groups a period runs, and why."""

    groups: int
    reason: str
    busy_s: float
    """The period's predicted work at `groups`: its steps and the prefill."""
    late_s: float
    """The latest any of its turns is predicted to start, past its due time."""


def _period(step_s: float, groups: int, prefill_s: float, period_s: float) -> tuple[float, float]:
    """(when the period's work ends, the latest a turn starts past its due time) for `groups`
    equal steps with the prefill in the last turn (every turn has the same headroom; the last
    one's prefill delays no turn of its own period)."""
    end, late = 0.0, 0.0
    for g in range(groups):
        due = g * period_s / groups
        start = max(end, due)
        late = max(late, start - due)
        end = start + step_s + (prefill_s if g == groups - 1 else 0.0)
    return end, late


def choose(step_s: Callable[[int, int], float], sessions: int, prefill_s: float, period_s: float,
           margin_s: float = LATE_MARGIN_S, most: int = CHOICES[-1]) -> Choice:
    """The largest G in `CHOICES` (at most `most`) whose G steps of ceil(sessions / G) rows
    (`step_s(G, rows)`: seconds of one step of G's groups, measured or modeled: an engine's groups
    of G run their own buckets) plus `prefill_s` end within the
    period (else every period starts later than the last) and start every turn within `margin_s`
    of its due time; one group when none does."""
    tried: str | None = None
    for groups in sorted((g for g in CHOICES if g <= most), reverse=True):
        rows = -(-sessions // groups)
        step = step_s(groups, rows) if rows else 0.0
        busy, late = _period(step, groups, prefill_s, period_s)
        summary = (f"{groups} x {step * 1e3:.1f} ms ({rows} rows) + prefill {prefill_s * 1e3:.1f} ms "
                   f"ends at {busy * 1e3:.1f} of {period_s * 1e3:.0f} ms, turns up to {late * 1e3:.1f} ms late")
        if busy <= period_s and late <= margin_s:
            return Choice(groups, f"{summary}: fits" + (f"; not {tried}" if tried else ""), busy, late)
        if groups == 1:
            return Choice(groups, f"{summary}: none fits, one group", busy, late)
        tried = summary
    raise AssertionError("CHOICES holds 1")


class Steps:
    """A step's seconds by bucket as the rule weighs them: measured at startup, then the median of
    the last `SEEN_STEPS` steps the engine ran at that bucket once it has run `TRUST_STEPS`.

    The startup figure alone is not enough: on a shared CPU another process can hold the core
    while it is measured (a 1-row step of the tiny model measured 22 ms against 7 ms run), and
    that figure would hold G down for the pod's life; and a step grows as its sessions' attention
    spans do. The steps run say what a period costs now. A bucket never run keeps its startup
    figure."""

    __slots__ = ("_startup", "_seen")

    def __init__(self, startup: Mapping[int, float]) -> None:
        self._startup = dict(startup)
        self._seen: dict[int, deque[float]] = {}

    def observe(self, bucket: int, seconds: float) -> None:
        """A step ran at `bucket` and took `seconds` (its device work and the one sync)."""
        self._seen.setdefault(bucket, deque(maxlen=SEEN_STEPS)).append(seconds)

    def __getitem__(self, bucket: int) -> float:
        seen = self._seen.get(bucket)
        if seen is not None and len(seen) >= TRUST_STEPS:
            return statistics.median(seen)
        return self._startup[bucket]

    def ms(self) -> dict[int, float]:
        """Every bucket's figure now, ms (the startup log line)."""
        return {b: round(self[b] * 1e3, 2) for b in sorted(self._startup)}


class Hold:
    """`choose`'s answer taken at once when it is smaller, after `UP_PERIODS` periods of asking
    for more when it is larger (then the least it asked for meanwhile)."""

    __slots__ = ("groups", "_want", "_calm", "_up")

    def __init__(self, groups: int, up_periods: int = UP_PERIODS) -> None:
        self.groups = groups
        self._up = up_periods
        self._calm = 0
        self._want = groups

    def update(self, wanted: int) -> int:
        """A period's `choose`: the groups to run it with."""
        if wanted <= self.groups:
            self.groups, self._calm = wanted, 0
            return wanted
        self._want = wanted if self._calm == 0 else min(self._want, wanted)
        self._calm += 1
        if self._calm >= self._up:
            self.groups, self._calm = self._want, 0
        return self.groups


def phases(groups: int, most: int) -> tuple[int, ...]:
    """The sub-ticks (of `most` a period) at which the `groups` groups take their turns."""
    if groups < 1 or most % groups:
        raise ValueError(f"{groups} groups do not divide {most} sub-ticks")
    return tuple(range(0, most, most // groups))


def spans(slots: int, groups: int) -> list[slice]:
    """The slots each of `groups` groups owns of `slots`: group j holds j S / G up to (j + 1) S / G
    (the sizes differ by one at most)."""
    return [slice(j * slots // groups, (j + 1) * slots // groups) for j in range(groups)]


def turn(sub: int, groups: int, most: int) -> int | None:
    """The group whose turn sub-tick `sub` is, or None (a sub-tick no group runs at)."""
    stride = most // groups
    return None if sub % stride else sub // stride


def regroup(at: Sequence[int], groups: int, most: int, room: Sequence[int]) -> list[int]:
    """Where each session goes when the engine changes to `groups` groups at a period's start.

    `at[i]`: the sub-tick session i took its last turn at (the previous period's); `room[g]`: how
    many sessions new group g holds. A session takes the first new turn at or after its old one, so
    it waits longer for that one turn and hears no silence; one past the last new turn, or finding
    it full, the next group round the period (an earlier turn: the caller buffer's `later` then
    defers it a turn when its frame is not whole). Sessions are placed latest first, so those that
    wrap round are the ones least early. Every session gets a group while they fit the room."""
    if len(at) > sum(room):
        raise ValueError(f"{len(at)} sessions do not fit {sum(room)} slots")
    turns = phases(groups, most)
    left = list(room)
    out = [0] * len(at)
    for i in sorted(range(len(at)), key=lambda i: -at[i]):
        first = next((g for g, t in enumerate(turns) if t >= at[i]), 0)
        g = first
        while not left[g]:
            g = (g + 1) % groups
        left[g] -= 1
        out[i] = g
    return out
