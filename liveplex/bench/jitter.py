"""Caller network profiles: when each chunk of a bench caller's stream leaves, against its deadline.

A phone on a busy network does not send on time: its frames arrive late now and then, and after a
stall it sends what it owes at once. Each profile is a pure schedule, seeded per session, so a run is
repeatable and the pod and the reference see the same network:

- `none`: every chunk on its deadline;
- `uniform20`: each chunk 0-20 ms late, independently (order kept: a chunk never overtakes another);
- `burst50`: 0-5 ms late, and about twice a second a 50 ms hold, then what is owed at once;
- `stall300`: one 300 ms stall every 10 s (the first at a seeded point of the first 10 s), then
  what is owed at once;
- `late50`: each chunk 0-50 ms late, and a 100 ms hold every 5 s (the first at a seeded point of
  the first 5 s), then what is owed at once: issue 44's jittery caller.
"""

from __future__ import annotations

import random

PROFILES = ("none", "uniform20", "burst50", "stall300", "late50")
MS = 1_000_000


def offsets(profile: str, chunk_ms: int, chunks: int, seed: int) -> list[int]:
    """Each chunk's delay past its deadline (`k · chunk_ms`), ns; non-decreasing send times."""
    if profile not in PROFILES:
        raise ValueError(f"jitter profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    rng = random.Random(f"{profile}:{seed}")
    chunk = chunk_ms * MS
    if profile == "none":
        return [0] * chunks
    if profile == "uniform20":
        late = [rng.randrange(0, 20 * MS) for _ in range(chunks)]
    elif profile == "burst50":
        late = [rng.randrange(0, 5 * MS) for _ in range(chunks)]
        holds = [k * chunk for k in range(chunks) if rng.random() < chunk_ms / 500]
        late = _hold(late, chunk, holds, 50 * MS)
    elif profile == "late50":
        first = rng.randrange(0, 5_000 * MS)
        late = _hold([rng.randrange(0, 50 * MS) for _ in range(chunks)], chunk,
                     list(range(first, chunks * chunk, 5_000 * MS)), 100 * MS)
    else:
        first = rng.randrange(0, 10_000 * MS)
        late = _hold([0] * chunks, chunk, list(range(first, chunks * chunk, 10_000 * MS)), 300 * MS)
    out, last = [], 0
    for k, d in enumerate(late):  # in order: a chunk waits for the one before it
        at = max(k * chunk + d, last)
        out.append(at - k * chunk)
        last = at
    return out


def _hold(late: list[int], chunk: int, starts: list[int], length: int) -> list[int]:
    """Chunks due within `length` of each start leave together when it ends."""
    for start in starts:
        for k in range(-(-start // chunk), min(len(late), -(-(start + length) // chunk))):
            late[k] = max(late[k], start + length - k * chunk)
    return late
