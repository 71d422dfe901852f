"""Front-end counters shared by every socket of a process: read by `/live/stats` and `/metrics`.

Plain ints on the event loop's thread; the engine's own counters live in `liveplex.live.Pulse`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class Tally:
    """What the front end did, cumulative (except the `sockets_open` gauge)."""

    sockets_open: int = 0
    accepted: int = 0
    """Sessions that reached `session.started`."""
    rejected: Counter[str] = field(default_factory=Counter)
    """Refused starts by reason: `server_busy`, `server_error`, `invalid`."""
    closed: Counter[str] = field(default_factory=Counter)
    """Ended sessions by reason: `close_requested`, `expired`, `connection_lost`,
    `remote_hangup` (the client dropped the socket), `server_shutdown`."""
    errors: Counter[str] = field(default_factory=Counter)
    """`error` events sent, by code."""
    underruns: int = 0
    """Jitter-buffer dry spells, added from each session's `Closed`."""
    dropped_samples: int = 0
    """Caller samples dropped by the jitter cap, added from each session's `Closed`."""
