"""`Replay`: the events a relayed session's pod sent lately, so that a caller re-attached through
another gateway gets the events it missed, none twice and none lost (docs/continuity.md "Re-attach").

The caller says the last server `event_id` it saw; every event sent after it is missed, and is sent
again. Audio is not: GPT-Live's audio deltas carry no `event_id` (the SDK's type has none), so a
caller cannot say which it played, and one replayed could be heard twice; and audio played late
would keep the caller that late for the rest of the call, where a duplex conversation wants it back
in the present. The pod went on ticking while no gateway was there (the model heard silence), so
the caller hears a gap as long as it was away, and nothing after it shifted.

Pure.
"""

from __future__ import annotations

import itertools
from collections import deque

from liveplex.gptlive import events

MAX_EVENTS = 256
"""Events kept; past the bound the oldest go first. An estimate, not a measurement: a window of
the default 15 s holds three usage events (one each 5 s) and a transcript delta a word spoken."""


class Replay:
    """See the module docstring."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self._sent: deque[tuple[str, str]] = deque(maxlen=max_events)
        """(event_id, text) of each event sent, oldest first."""
        self._count = 0
        self._parked_at: int | None = None
        """`_count` when the session's socket went away (None: attached)."""

    def keep(self, event: events.ServerEvent, text: str) -> None:
        """One server event sent to the session's socket (`text`), or made while none was there;
        audio is not kept (see the module docstring)."""
        if not isinstance(event, events.OutputAudioDelta):
            self._sent.append((event.event_id, text))
            self._count += 1

    def parked(self) -> None:
        """The socket went away: what is kept from now on a caller who names no event missed."""
        self._parked_at = self._count

    def missed(self, after: str) -> list[str]:
        """The texts a caller who last saw event `after` missed, oldest first; `after` empty (it
        names none): those made since the socket went away."""
        ids = [event_id for event_id, _ in self._sent]
        if after:  # an id older than every event kept: all of them came after it
            start = ids.index(after) + 1 if after in ids else 0
        else:
            since = 0 if self._parked_at is None else self._count - self._parked_at
            start = max(0, len(ids) - since)
        self._parked_at = None
        return [text for _, text in itertools.islice(self._sent, start, None)]
