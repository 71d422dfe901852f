"""`Pacing`: when the frames of one tick leave for their sockets (the paced fan-out, issue 12).

A tick computes every session's frame at once, so left to itself the front end writes them as one
burst the moment the tick ends. Two things then make a session's frames arrive unevenly: the
tick's end moves with the engine thread's scheduling and the GIL (a tick due while the loop is
busy starts late, and on a shared machine its duration varies threefold), and anything that
stalls the loop during the burst delays every session after that point at once.

Pacing fixes both with a schedule the tick's timing does not move: tick k's frames leave at
`due_k + lead` (at once if the tick ended later than that), in `waves` one `STEP_NS` apart over
`spread` — in the same order every tick (the order the engine wrote them: join order), so a
session keeps its place and its phase. `lead` turns tick jitter shorter than it into a constant
delay; `spread` bounds what one stall of the loop can delay to the sessions of one wave, and lets
the loop read between waves. Both cost latency (lead + up to spread), which is why they are
settings (`docs/bench.md` has the measured trade).
"""

from __future__ import annotations

from dataclasses import dataclass

STEP_NS = 4_000_000
"""Waves of one tick leave this far apart. Each wave is a wake-up of the loop; at 1 ms apart the
wake-ups cost a sim pod at 400 sessions about 15 µs per frame pair (11 %), at 4 ms nothing measurable,
and punctuality was as good (docs/bench.md)."""


@dataclass(frozen=True, slots=True)
class Pacing:
    """The schedule of a tick's frames, relative to the tick's due time."""

    lead_ns: int = 0
    """The first wave leaves this long after the tick was due (0: as soon as computed)."""
    spread_ns: int = 0
    """The last wave leaves this long after the first (0: all in one go)."""

    def __post_init__(self) -> None:
        if self.lead_ns < 0 or self.spread_ns < 0:
            raise ValueError(f"pacing lead and spread must be >= 0 ns, got {self.lead_ns} and {self.spread_ns}")

    def wait_ns(self, due_ns: int, now_ns: int) -> int:
        """How long after `now_ns` a tick due at `due_ns` hands its frames out (0: now)."""
        return max(0, due_ns + self.lead_ns - now_ns)


def waves(n: int, wait_ns: int, spread_ns: int) -> list[tuple[int, int]]:
    """Split `n` outputs, in order, into waves: `(end, delay_ns)`, outputs `[previous end, end)`
    leave `delay_ns` from now (<= 0: at once). As many waves as `spread_ns` holds steps, at most
    one per output, of equal size but the last."""
    if n <= 0:
        return []
    count = max(1, min(n, spread_ns // STEP_NS + 1 if spread_ns else 1))
    size = -(-n // count)
    return [(min(n, end), wait_ns + k * STEP_NS) for k, end in enumerate(range(size, n + size, size))]
