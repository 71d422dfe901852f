"""`Placing`: how a client's `session.start` finds its pod (platform §7.3-§7.5), as a sans-I/O machine.

The relay's shell (`relay.UpstreamLeg`) does the I/O — Redis, the upstream dial, the pod's first
answer, the client's replies — and feeds each outcome here; `Placing` answers with the next
`Command`. It never awaits, reads no clock and knows nothing of sockets, so every retry rule is
tested directly (tests/gateway/test_placing.py):

- a pool that looks full is asked once more after `BUSY_RECHECK_S` (a session that just ended
  reaches the client, through this gateway, a moment before its pod's count reaches Redis);
- a pod that cannot be dialled, or that does not answer the start, is excluded (the shell trips
  its breaker and gives its reservation back) and the session placed once more;
- a pod that answers `server_busy` (its count was stale in Redis) is excluded likewise; if the
  last try is also busy, the client hears that pod's own words (its `event_id` echoed);
- any other answer than `session.started` is the pod's verdict on the client's start: relayed;
- at most `PLACEMENTS` placements in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from liveplex.gptlive import errors, events
from liveplex.placement import Busy, Placed

PLACEMENTS = 2
"""platform §7.5: a busy or unreachable pod is excluded and the session placed once more."""
BUSY_RECHECK_S = 0.1
"""How long before a pool that looks full is asked once more."""


@dataclass(frozen=True, slots=True)
class Place:
    """Run placement, excluding these pods; answer with `placed`."""

    exclude: frozenset[str]


@dataclass(frozen=True, slots=True)
class Recheck:
    """Wait `delay_s`, then answer with `rechecked`."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class Dial:
    """Dial the pod and forward the start; answer with `answered`, or `unreachable`."""

    placed: Placed


@dataclass(frozen=True, slots=True)
class Start:
    """The pod started the session: relay its `session.started` (`text`) and hand the socket over."""

    placed: Placed
    text: str
    expires_at: int | None
    retried: bool


@dataclass(frozen=True, slots=True)
class Refuse:
    """Tell the client no: `error` from this gateway, or `relay`, a pod's own answer, verbatim.
    `busy`: a refusal for want of room, counted as such (None: not counted as busy)."""

    error: errors.ProtocolError | None = None
    relay: str | None = None
    busy: Busy | None = None


Command = Place | Recheck | Dial | Start | Refuse

NO_ENGINE_REACHED = errors.server_error("no engine could be reached")
_STARTED = events.SERVER_TYPES[events.SessionStarted]
_ERROR = events.SERVER_TYPES[events.Error]


def event_kind(text: str) -> tuple[str, dict[str, object]]:
    """The `type` of a rare upstream event and its body ("" when unreadable)."""
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        return "", {}
    if not isinstance(body, dict):
        return "", {}
    return str(body.get("type", "")), body


def refusal_for(busy: Busy) -> errors.ProtocolError:
    """What a client is told when placement found no room: no engine at all, every one excluded
    (tripped or just failed: none was left to try), or every slot taken."""
    if busy.no_engines:
        return errors.no_engines()
    if busy.total_capacity == 0:
        return errors.no_engine_free()
    return errors.server_busy(busy.total_capacity)


@dataclass(slots=True)
class Placing:
    """One start's way to a pod; see the module docstring. `tripped`: pods this gateway's breakers
    exclude now."""

    tripped: frozenset[str]
    exclude: set[str] = field(init=False)
    attempt: int = 0
    """Placements that led to a dial so far (the first is 0)."""
    _rechecked: bool = False
    _unreachable: bool = False
    _busy_text: str | None = None
    """The last pod's own `server_busy` answer."""

    def __post_init__(self) -> None:
        self.exclude = set(self.tripped)

    def begin(self) -> Place:
        return Place(frozenset(self.exclude))

    def placed(self, result: Placed | Busy | errors.ProtocolError) -> Command:
        """Placement answered: a pod, no room, or placement itself unavailable."""
        if isinstance(result, errors.ProtocolError):
            return Refuse(result, busy=Busy(0, 0, no_engines=False))
        if isinstance(result, Busy):
            if self.attempt == 0 and not result.no_engines and not self._rechecked:
                self._rechecked = True
                return Recheck(BUSY_RECHECK_S)
            if self._busy_text is not None:
                return self._exhausted()
            if self._unreachable:
                return Refuse(NO_ENGINE_REACHED, busy=result)
            return Refuse(refusal_for(result), busy=result)
        return Dial(result)

    def rechecked(self) -> Command:
        return Place(frozenset(self.exclude))

    def unreachable(self, placed: Placed) -> Command:
        """The pod could not be dialled or did not answer the start in time."""
        self._unreachable = True
        self.exclude.add(placed.pod)
        return self._next()

    def answered(self, placed: Placed, text: str) -> Command:
        """The pod's first message after the forwarded start."""
        kind, body = event_kind(text)
        if kind == _STARTED:
            session = body.get("session")
            expires = session.get("expires_at") if isinstance(session, dict) else None
            return Start(placed, text, expires if isinstance(expires, int) else None, self.attempt > 0)
        error = body.get("error")
        if kind == _ERROR and isinstance(error, dict) and error.get("code") == errors.Code.SERVER_BUSY.value:
            self._busy_text = text
            self.exclude.add(placed.pod)
            return self._next()
        return Refuse(relay=text)

    def _next(self) -> Command:
        self.attempt += 1
        return Place(frozenset(self.exclude)) if self.attempt < PLACEMENTS else self._exhausted()

    def _exhausted(self) -> Command:
        if self._busy_text is not None:  # the pod's own words, with the client's event id
            return Refuse(relay=self._busy_text, busy=Busy(0, 0, no_engines=False))
        return Refuse(NO_ENGINE_REACHED)
