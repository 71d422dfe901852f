"""Protocol settings: the timings and options of `Connection`, one frozen value (style rule 6).

Pure: no command line here. The server layer (`gptlive.server.settings`) builds this from flags
whose defaults are read from these fields, so each default is written once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Settings:
    """How a GPT-Live connection behaves; every duration carries its unit."""

    info_events: bool = False
    """Send the optional `info` events (voice_mapped, default_instructions) after start. The ones a
    client must know (input_truncated, delegation_unused) are always sent."""
    close_grace_ms: int = 2_000
    """After `session.close`, how long to wait for the engine before closing anyway."""
    usage_period_ms: int = 5_000
    """Session time between `session.usage.updated` events."""
    start_timeout_ms: int = 30_000
    """A pending start with no answer from the engine after this gets `server_error`."""
    idle_guard_ms: int = 60_000
    """With no session, close the socket after this long without a client message."""
    errors_per_s: int = 50
    """`error` replies a socket gets per second; past it the socket is not read until the second
    ends, so a client answering every error with a new bad event is slowed, never silenced."""

    def __post_init__(self) -> None:
        for name in ("close_grace_ms", "usage_period_ms", "start_timeout_ms", "idle_guard_ms", "errors_per_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
