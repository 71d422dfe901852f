"""The timing checks against a correct server when the checker itself is starved (issue 46).

A busy machine delays the checker's own tasks, not the server: these tests make that delay happen
every time, in the way each check met it, against an in-process sim pod. Each failed on the
checker's code before its fix, with the message a starved run printed.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping

import pytest

from liveplex.conformance import runner, target, wire
from liveplex.conformance.checklist import Check, Outcome, Status
from liveplex.conformance.checks import stream
from tests.conformance import relay
from tests.support import pods

pytestmark = pytest.mark.timeout(60)

USAGE_PERIOD_S = 1.0
"""The pod's usage period here (the spec's 5 s made short, the check told the same)."""

RESUMED_LATE_S = 1.5
"""How long after `session.started` arrived the usage check resumes: more than the check's 0.5 s
slack, so timing from any later entry of the log (the stream the reader went on logging) fails."""

PREEMPTED_S = 0.03
"""How long the checker stalls after each write. Short of Linux's 200 ms ceiling on a corked
write, which is as long a stall as `Wire.send_together` can hold a segment together through."""

SEGMENT_GAP_S = 0.5
"""Between two segments reaching the pod: the sim finishes a close in a tick (80 ms)."""


async def _run(number: int, address: str) -> Outcome:
    """Check `number` alone against the server at `address`."""
    check: Check = runner.select(str(number))[0]
    options = target.Options(base_url=f"http://{address}/v1", timeout_s=5.0)
    return await runner.run_one(check, target.Target(options, target.Server({}, {}, ())), wire.Ledger())


async def test_usage_cadence_is_timed_from_session_started_however_late_the_check_resumes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check resumes 1.5 s after `session.started` arrived while its reader logs the audio
    stream. Timed from the log's last entry then (before `Wire.arrival`), usage 1 'came' before
    `session.started`: 'usage 1 came -0.72 s after session.started, expected 1 ± 0.5 s'."""
    start = wire.Wire.start

    async def resumed_late(self: wire.Wire, session: Mapping[str, object] | None = None,
                           event_id: str | None = "start") -> wire.Json:
        started = await start(self, session, event_id)
        await asyncio.sleep(RESUMED_LATE_S)
        return started

    monkeypatch.setattr(wire.Wire, "start", resumed_late)
    monkeypatch.setattr(stream, "USAGE_PERIOD_S", USAGE_PERIOD_S)
    async with pods.in_process("--usage-period-ms", str(round(USAGE_PERIOD_S * 1000))) as pod:
        outcome = await _run(28, pod.address)
    assert outcome.status is Status.PASS, outcome.detail


@pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="Linux's TCP_CORK holds the segment together")
async def test_closing_state_reaches_the_server_in_one_segment_from_a_preempted_checker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker stalls after each write and the path spaces segments half a second apart, so
    the close finishes before anything written after it arrives. The close, append and mute leave
    corked in one segment and the pod answers the mute while closing; as three writes (before
    `Wire.send_together`) the close came back first: 'expected error session_closing ..., got
    {"type": "session.closed", ...}'."""
    send = wire.Wire.send

    async def preempted(self: wire.Wire, event: dict[str, object]) -> None:
        await send(self, event)
        await asyncio.sleep(PREEMPTED_S)

    monkeypatch.setattr(wire.Wire, "send", preempted)
    async with pods.in_process() as pod, relay.spaced(pod.address, SEGMENT_GAP_S) as address:
        outcome = await _run(35, address)
    assert outcome.status is Status.PASS, outcome.detail
