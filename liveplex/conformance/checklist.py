"""What a check is, and how it ends: PASS, FAIL with a reason, or SKIP with a reason."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from liveplex.conformance.context import Context


class Status(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """How one check ended; `detail` says why (or what was measured)."""

    status: Status
    detail: str = ""


class Failed(Exception):
    """The server broke the check; the message says what was sent and what came back."""


class Skipped(Exception):
    """The check cannot run against this server as started; the message says which flag enables it."""


def expect(condition: object, message: str) -> None:
    """Fail the running check with `message` unless `condition` holds."""
    if not condition:
        raise Failed(message)


Run = Callable[["Context"], Awaitable[str | None]]
"""A check's body: returns an optional detail on success, raises `Failed` or `Skipped`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    """One item of the gpt-live §14 checklist."""

    number: int
    name: str
    """A short slug for `--only`, e.g. `start-happy`."""
    run: Run
    seconds: float = 2.0
    """About how long the check takes against a healthy server; its timeout adds `--timeout`."""
    alone: bool = False
    """Needs the server to itself (capacity, fault injection): runs after the others, one at a time."""
    final: bool = False
    """Judges what every other check saw: runs last."""
