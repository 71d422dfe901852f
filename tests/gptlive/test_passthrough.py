"""`Passthrough` driven directly: how a session an upstream runs ends on the client's side, each end
once, with what a gateway sends today (the upstream's usage and `expires_at`, the close codes)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from liveplex.gptlive import connection as c
from liveplex.gptlive.server import passthrough
from tests.gptlive.test_connection import START, codes, new, sent

WHY = "the engine serving this session went away"


def handed_off(safety_identifier: str | None = None) -> tuple[passthrough.Passthrough, c.Handoff]:
    """The machine a gateway's socket switches to once its upstream sent `session.started`."""
    conn = new()
    start = START if safety_identifier is None else START.replace(
        '"gpt-live-1"}', f'"gpt-live-1","safety_identifier":"{safety_identifier}"}}')
    assert [type(a) for a in conn.receive(start, 0, 1000.0)] == [c.Start]
    handoff = conn.started_upstream(expires_at=4242)
    assert handoff is not None
    return passthrough.Passthrough(handoff), handoff


ENDS: list[tuple[str, Callable[[passthrough.Passthrough], list[c.Command]], list[str], str | None, list[c.Command],
                 str, float, int]] = [
    # name, input, events sent, session.closed reason, commands after the events, counted as, seconds, frames
    # (frames: the audio deltas the pump relayed before the end)
    ("upstream closed", lambda r: r.ended("close_requested"), [], None,
     [c.Close(1000), c.Release()], "close_requested", 0.4, 5),
    ("upstream closed with its code", lambda r: r.ended("expired", 1001), [], None,
     [c.Close(1001), c.Release()], "expired", 240.0, 3000),
    ("upstream lost", lambda r: r.lost(WHY), ["server_error"], "connection_lost",
     [c.Close(1011), c.Release()], "connection_lost", 2.0, 25),
    ("client gone", lambda r: r.disconnect(), [], None, [c.Release()], "remote_hangup", 0.8, 10),
    ("server stopping", lambda r: r.shutdown(), ["server_shutdown"], "connection_lost",
     [c.Close(1001), c.Release()], "server_shutdown", 0.8, 10),
]


@pytest.mark.parametrize(("name", "end", "errors", "closed", "commands", "counted", "seconds", "frames"), ENDS,
                         ids=[e[0] for e in ENDS])
def test_each_end_says_what_a_gateway_says_and_ends_the_session_once(
        name: str, end: Callable[[passthrough.Passthrough], list[c.Command]], errors: list[str], closed: str | None,
        commands: list[c.Command], counted: str, seconds: float, frames: int) -> None:
    machine, handoff = handed_off()
    assert machine.reading and machine.outcomes == []
    machine.frames = frames
    out = end(machine)
    told = sent(out)
    assert codes(out) == errors
    if errors == ["server_error"]:
        assert WHY in told[0]["error"]["message"] and "client_event_id" not in told[0]
    if closed is None:
        assert told == []
    else:
        session_closed = told[-1]
        assert (session_closed["type"], session_closed["reason"], session_closed["usage"]["seconds"],
                session_closed["session"]["expires_at"]) == ("session.closed", closed, seconds, 4242)
        assert "client_event_id" not in session_closed
    assert out[len(told):] == commands
    [ended] = machine.outcomes
    assert isinstance(ended, c.Ended)
    assert (ended.reason, ended.seconds, ended.frames) == (counted, seconds, frames)
    assert ended.session_id == handoff.resource.id and (ended.underruns, ended.dropped) == (0, 0)
    assert machine.done and not machine.reading and machine.frames == frames
    for again in ENDS:  # whatever comes after the end, nothing more is said or counted
        assert again[1](machine) == []
    assert machine.outcomes == [ended]


def test_the_end_carries_the_clients_safety_identifier() -> None:
    machine, _ = handed_off(safety_identifier="user-42")
    machine.lost(WHY)
    [ended] = machine.outcomes
    assert isinstance(ended, c.Ended) and ended.safety_identifier == "user-42"
