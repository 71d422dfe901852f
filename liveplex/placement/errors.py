"""The placement component's one exception root and its families.

Redis errors never leave `client.py` as redis-py types: `PlacementClient` translates them here, so a
gateway catches `RedisUnavailable` to fall back (platform §7.12) and `PlacementError` for the rest.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Root of every placement failure; never raised itself."""


class RedisUnavailable(PlacementError):
    """Redis could not be reached or did not answer in time (refused, reset, timed out, loading, read-only)."""


class RedisRefused(PlacementError):
    """Redis answered with an error: a key of the wrong type, a script error, out of memory."""


class InvalidName(PlacementError, ValueError):
    """A pool, pod or model name that cannot be part of a placement key."""

    def __init__(self, param: str, value: object, reason: str) -> None:
        super().__init__(f"{param}: {reason} (got {value!r})")
        self.param = param
        """Which argument was wrong (`pool`, `pod`, `model`)."""
        self.value = value


class InvalidRecord(PlacementError, ValueError):
    """A value read from Redis that is not what a liveplex writer writes (a hand edit, another program)."""

    def __init__(self, param: str, value: object, reason: str) -> None:
        super().__init__(f"{param}: {reason} (got {value!r})")
        self.param = param
        """Which field was wrong (`capacity`, `config`, ...)."""
        self.value = value
