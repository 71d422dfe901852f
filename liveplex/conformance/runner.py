"""Runs the selected checks against one server: concurrently, then the ones that need it alone, then the verdicts.

The shared checks start longest first (`Check.seconds`): with a few at a time, the 11-second usage
cadence started last would be the whole run's tail.

Against a server of known capacity (`/live/stats` or `--expect-capacity`) no more checks run at once
than it has slots, and no more sockets are open at once than that (`sessions.Sessions`), so a
small server is never asked for a session it cannot have.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import re
from collections.abc import Iterable

from liveplex.conformance import checks, context, sessions, target, wire
from liveplex.conformance.checklist import Check, Failed, Outcome, Skipped, Status

logger = logging.getLogger(__name__)

_NUMBERS = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")


def select(pattern: str | None, available: Iterable[Check] = checks.ALL) -> tuple[Check, ...]:
    """The checks `--only` names: numbers and ranges (`8,22-24`) or a glob on names (`start-*`)."""
    available = tuple(available)
    if not pattern:
        return available
    if _NUMBERS.match(pattern):
        wanted: set[int] = set()
        for part in pattern.split(","):
            low, _, high = part.partition("-")
            wanted.update(range(int(low), int(high or low) + 1))
        return tuple(c for c in available if c.number in wanted)
    glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
    return tuple(c for c in available if fnmatch.fnmatch(c.name, glob))


async def run_one(check: Check, tgt: target.Target, ledger: wire.Ledger,
                  budget: sessions.Sessions | None = None) -> Outcome:
    """One check with its timeout; every way it can end becomes an `Outcome`. Its sockets take
    slots of `budget` (None: the check has the server to itself)."""
    try:
        async with asyncio.timeout(check.seconds + tgt.options.timeout_s) as timeout:
            ctx = context.Context(tgt, ledger, check.number, budget, sessions.Deadline(timeout))
            detail = await check.run(ctx)
    except Failed as exc:
        return Outcome(Status.FAIL, str(exc))
    except Skipped as exc:
        return Outcome(Status.SKIP, str(exc))
    except TimeoutError:
        return Outcome(Status.FAIL, f"timed out after {check.seconds + tgt.options.timeout_s:g} s")
    except Exception as exc:  # the server broke the socket, refused an upgrade, ...: a failure, not a crash
        logger.debug("check %s raised", check.number, exc_info=True)
        return Outcome(Status.FAIL, f"{type(exc).__name__}: {exc}")
    return Outcome(Status.PASS, detail or "")


async def run(selected: Iterable[Check], tgt: target.Target) -> dict[int, Outcome]:
    """Run checks: shared ones at most `concurrency` (and at most the server's capacity) at a time,
    then `alone` ones, then `final` ones."""
    selected = tuple(selected)
    ledger = wire.Ledger()
    outcomes: dict[int, Outcome] = {}
    budget = sessions.Sessions(tgt.capacity)
    gate = asyncio.Semaphore(concurrency(tgt))

    async def gated(check: Check) -> None:
        async with gate:
            outcomes[check.number] = await run_one(check, tgt, ledger, budget)

    async def alone(check: Check) -> Outcome:
        give_back = await budget.take(tgt.capacity or 1)  # every slot: nothing else holds one
        try:
            return await run_one(check, tgt, ledger)
        finally:
            give_back()

    async with asyncio.TaskGroup() as group:
        for check in longest_first(c for c in selected if not (c.alone or c.final)):
            group.create_task(gated(check))
    for check in selected:
        if check.alone:
            outcomes[check.number] = await alone(check)
    for check in selected:
        if check.final:
            outcomes[check.number] = await run_one(check, tgt, ledger, budget)
    return outcomes


def longest_first(shared: Iterable[Check]) -> list[Check]:
    """The order the gate lets checks in (asyncio's semaphore is first come, first served): the
    longest first, so the run ends when its longest checks do, not one check-length after; ties
    keep the checklist's order."""
    return sorted(shared, key=lambda check: -check.seconds)


def concurrency(tgt: target.Target) -> int:
    """Checks run at once: `--concurrency`, but no more than the server has slots."""
    return max(1, min(tgt.options.concurrency, tgt.capacity or tgt.options.concurrency))
