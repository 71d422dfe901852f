"""`FrontStats`: what a server's live sockets did, counted from their protocol machines' steps.

One writer: the socket pump, on the event loop's thread, tells it every outcome (it is a
`backend.Observer`) and every event it sends that is not audio (`sent`: the `error`s). Readers
(`/live/stats`, `/metrics`, a pod's Redis heartbeat) take a `snapshot()`, so all three say the
same thing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from liveplex.gptlive import connection, events
from liveplex.live.buckets import Buckets

SESSION_SECONDS_BUCKETS: tuple[float, ...] = (1, 5, 10, 30, 60, 120, 240, 480, 960, 1920)
"""Session length buckets, seconds: the default session is 240 s."""
START_SECONDS_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Start latency buckets, seconds: a placed start takes milliseconds, a first frame a tick or two
more; a PersonaPlex prefill of a long prompt can take a second."""


@dataclass(frozen=True, slots=True)
class FrontSnapshot:
    """A consistent copy of the counters at one moment."""

    sockets_open: int
    sessions_open: int
    """Sessions accepted and not yet ended (starting ones are not counted)."""
    accepted: int
    rejected: dict[str, int]
    closed: dict[str, int]
    errors: dict[str, int]
    underruns: int
    dropped_samples: int
    session_seconds: Buckets
    dropped: dict[str, int]
    start_seconds: Buckets
    first_audio_seconds: Buckets


@dataclass(slots=True)
class FrontStats:
    """Cumulative counters (except the two open gauges); see the module docstring."""

    sockets_open: int = 0
    accepted: int = 0
    """Sessions that reached `session.started`."""
    rejected: Counter[str] = field(default_factory=Counter)
    """Refused starts by reason: `server_busy`, `server_error`, `invalid`, `upstream`, ..."""
    closed: Counter[str] = field(default_factory=Counter)
    """Ended sessions by reason: `close_requested`, `expired`, `connection_lost`,
    `remote_hangup` (the client dropped the socket), `server_shutdown`."""
    errors: Counter[str] = field(default_factory=Counter)
    """`error` events sent, by code."""
    underruns: int = 0
    """Jitter-buffer dry spells, added from each session's end."""
    dropped_samples: int = 0
    """Caller samples dropped by the jitter cap, added from each session's end."""
    session_seconds: Buckets = field(default_factory=lambda: Buckets(SESSION_SECONDS_BUCKETS))
    start_seconds: Buckets = field(default_factory=lambda: Buckets(START_SECONDS_BUCKETS))
    """From a valid `session.start` to its `session.started` (sent, or relayed by a gateway)."""
    first_audio_seconds: Buckets = field(default_factory=lambda: Buckets(START_SECONDS_BUCKETS))
    """From a valid `session.start` to the session's first audio delta: the speech analogue of time
    to first token."""
    dropped: Counter[str] = field(default_factory=Counter)
    """Connections the server cut, by why: `slow_frames` and `slow_bytes` (a client too far
    behind), `ping_timeout`, `header_timeout` (no complete request in time), `over_capacity`
    (beyond `max_connections`)."""

    def sent(self, event: events.ServerEvent) -> None:
        """One event sent that is not an audio delta: an `error` is counted by its code."""
        if type(event) is events.Error:
            self.errors[event.error.code.value] += 1

    # --- backend.Observer ---------------------------------------------------------------------------

    def session_accepted(self, conn: connection.Connection, outcome: connection.Accepted) -> None:
        self.accepted += 1

    def session_refused(self, conn: connection.Connection, outcome: connection.Refused) -> None:
        self.rejected[outcome.reason] += 1

    def session_ended(self, conn: connection.Connection, outcome: connection.Ended) -> None:
        self.closed[outcome.reason] += 1
        self.underruns += outcome.underruns
        self.dropped_samples += outcome.dropped
        self.session_seconds.observe(outcome.seconds)

    @property
    def sessions_open(self) -> int:
        """Sessions accepted and not yet ended."""
        return self.accepted - sum(self.closed.values())

    def snapshot(self) -> FrontSnapshot:
        ended = sum(self.closed.values())
        return FrontSnapshot(
            sockets_open=self.sockets_open, sessions_open=self.accepted - ended,
            accepted=self.accepted, rejected=dict(self.rejected), closed=dict(self.closed),
            errors=dict(self.errors), underruns=self.underruns, dropped_samples=self.dropped_samples,
            session_seconds=self.session_seconds.copy(), dropped=dict(self.dropped),
            start_seconds=self.start_seconds.copy(), first_audio_seconds=self.first_audio_seconds.copy(),
        )

