"""`Quota`: what one API key may take of a pool: concurrent sessions and starts per second.

Pure, time as an argument. Without per-key limits one key (a leaked one, a runaway client) could
hold every slot of the pool or churn starts faster than placement can answer, so both have
defaults. They apply to keyed gateways only: without API keys every client is the same anonymous
caller, and a per-key limit would be a limit on the whole gateway.

Starts are metered by a token bucket per key: `starts_per_s` tokens a second, up to one second's
worth banked, so a burst of a second's starts passes and a steady flood runs at the rate. Idle
keys' buckets are forgotten once full, so the table holds only keys that are busy now.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from liveplex.gptlive import errors
from liveplex.gptlive.errors import ProtocolError


@dataclass(slots=True)
class Quota:
    max_sessions: int
    """Concurrent sessions per key; 0: no limit."""
    starts_per_s: float
    """Session starts per key per second; 0: no limit."""
    _sessions: Counter[str] = field(default_factory=Counter)
    _buckets: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per key: (tokens, when they were counted, in ns)."""

    def admit(self, key: str, now_ns: int) -> ProtocolError | None:
        """Take a session for `key` at `now_ns`, or the `server_busy` refusal saying which limit."""
        if self.max_sessions and self._sessions[key] >= self.max_sessions:
            return errors.key_session_limit(self.max_sessions)
        if self.starts_per_s:
            tokens, then = self._buckets.get(key, (self.starts_per_s, now_ns))
            tokens = min(self.starts_per_s, tokens + (now_ns - then) / 1e9 * self.starts_per_s)
            if tokens < 1:
                self._buckets[key] = (tokens, now_ns)
                return errors.key_start_rate(self.starts_per_s)
            self._buckets[key] = (tokens - 1, now_ns)
            self._forget_full(now_ns)
        self._sessions[key] += 1
        return None

    def hold(self, key: str) -> None:
        """Count a session that started elsewhere and continues here (a re-attach): never refused,
        since refusing would drop a live call, and no start is metered; but while it runs here it
        counts against its key like any, so a rollout does not reset a key's sessions to zero."""
        self._sessions[key] += 1

    def release(self, key: str) -> None:
        """A session `admit` took has ended."""
        self._sessions[key] -= 1
        if self._sessions[key] <= 0:
            del self._sessions[key]

    def _forget_full(self, now_ns: int) -> None:
        """Drop buckets that have refilled (one second idle): bounded by the keys active now."""
        if len(self._buckets) > 2 * len(self._sessions) + 16:
            self._buckets = {k: (t, at) for k, (t, at) in self._buckets.items()
                             if t + (now_ns - at) / 1e9 * self.starts_per_s < self.starts_per_s}
