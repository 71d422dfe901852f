"""A relayed session outlives its gateway's socket (docs/continuity.md "Re-attach"): dropped without
the caller's end, the pod keeps it running for the grace window, and a socket that re-attaches
(`hop.REATTACH_HEADER`) continues it: the same id and usage, the events the caller missed once
each, then the session as before. A close with the caller's end, an unknown id, or the window
passed: it is gone (404 at the upgrade), its slot free.

A real pod in this process, raw sockets playing the gateway (with its `SESSION_ID_HEADER`).
"""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
import websockets

from liveplex.gptlive import events
from liveplex.gptlive.server import hop
from liveplex.gptlive.server.replay import Replay
from tests.support import clients, pods

USAGE_MS = "400"
"""Usage events every 400 ms of session time: events made while the session is parked."""


def _relay(session_id: str, **more: str) -> dict[str, str]:
    return {hop.SESSION_ID_HEADER: session_id, **more}


async def _stats(pod: pods.Running) -> dict:
    async with httpx.AsyncClient() as http:
        return (await http.get(pod.admin_root + "/live/stats")).json()


async def _refused(pod: pods.Running, session_id: str) -> int:
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(pod.ws_url, additional_headers=_relay(session_id, **{hop.REATTACH_HEADER: ""}))
    return refused.value.response.status_code


async def test_a_dropped_socket_parks_the_session_and_a_reattach_continues_it_missing_nothing() -> None:
    async with pods.in_process("--usage-period-ms", USAGE_MS, "--reattach-grace-s", "10") as pod:
        ws, started = await clients.started(pod.ws_url, _relay("sess_park"))
        before = (await clients.events_while_speaking(ws, 1.5))[0]
        assert any(e["type"] == "session.usage.updated" for e in before)
        seen = before[len(before) // 2]  # the caller says it saw only this far: the rest it missed
        ws.transport.abort()  # the gateway died: no close frame
        await asyncio.sleep(1.0)  # the session goes on without a socket
        assert (await _stats(pod))["sessions"] == 1

        again = await websockets.connect(pod.ws_url, max_queue=None, additional_headers=_relay(
            "sess_park", **{hop.REATTACH_HEADER: seen["event_id"]}))
        note = orjson.loads(await again.recv())
        assert note["type"] == hop.REATTACHED and note["expires_at"] == started["session"]["expires_at"]
        record = await again.recv()
        assert isinstance(record, str) and record.startswith(hop.CHECKPOINT_PREFIX)
        assert len(hop.checkpoint_data(record)) > 100  # the whole record so far, not one tick's
        missed = [orjson.loads(await again.recv()) for _ in range(note["replayed"])]
        after = (await clients.events_while_speaking(again, 1.0))[0]

        ids = [e["event_id"] for e in before] + [e["event_id"] for e in missed + after]
        resent = before[before.index(seen) + 1:]
        assert missed[:len(resent)] == resent  # what the caller missed on the first socket, in order
        assert len(missed) > len(resent)  # and what was made while parked: usage went on
        assert len(set(ids)) == len(ids) - len(resent)  # nothing else twice
        usage = [e["usage"]["seconds"] for e in before + missed[len(resent):] + after
                 if e["type"] == "session.usage.updated"]
        assert usage == sorted(usage) and usage[-1] >= 3.0  # one session's time, through the gap
        assert note["frames"] >= 30  # ~2.5 s of frames ran before the re-attach
        await again.send(orjson.dumps({"type": "session.close", "event_id": "bye"}).decode())
        closed, _ = await clients.until(again, "session.closed")
        assert closed["reason"] == "close_requested" and closed["session"]["id"] == started["session"]["id"]
        await again.close()


async def test_a_reattach_takes_over_a_socket_still_open() -> None:
    """A half-open connection (the gateway gone, its TCP not yet) must not block the caller."""
    async with pods.in_process("--reattach-grace-s", "10") as pod:
        old, _ = await clients.started(pod.ws_url, _relay("sess_stale"))
        new = await websockets.connect(pod.ws_url, max_queue=None,
                                       additional_headers=_relay("sess_stale", **{hop.REATTACH_HEADER: ""}))
        assert orjson.loads(await new.recv())["type"] == hop.REATTACHED
        async with asyncio.timeout(5):
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    await old.recv()
        assert old.close_code == hop.TAKEN_OVER_CLOSE
        assert (await _stats(pod))["sessions"] == 1
        await new.close()


async def test_the_callers_end_an_unknown_id_and_a_passed_window_leave_nothing_to_reattach() -> None:
    async with pods.in_process("--reattach-grace-s", "1") as pod:
        assert await _refused(pod, "sess_never") == 404

        ended, _ = await clients.started(pod.ws_url, _relay("sess_ended"))
        await ended.close(hop.ENDS_SESSION_CLOSE)  # the caller hung up: no park
        assert await _refused(pod, "sess_ended") == 404

        left, _ = await clients.started(pod.ws_url, _relay("sess_left"))
        left.transport.abort()
        await asyncio.sleep(0.3)
        assert (await _stats(pod))["sessions"] == 1  # parked
        async with asyncio.timeout(5):
            while (await _stats(pod))["sessions"]:
                await asyncio.sleep(0.1)  # the window passed: ended as a dropped socket's session is
        assert await _refused(pod, "sess_left") == 404


async def test_a_pod_without_a_window_ends_a_dropped_session_at_once() -> None:
    async with pods.in_process("--reattach-grace-s", "0") as pod:
        ws, _ = await clients.started(pod.ws_url, _relay("sess_now"))
        ws.transport.abort()
        async with asyncio.timeout(2):
            while (await _stats(pod))["sessions"]:
                await asyncio.sleep(0.05)
        assert await _refused(pod, "sess_now") == 404


def test_replay_gives_what_came_after_the_last_event_seen_or_since_the_park() -> None:
    replay = Replay(max_events=4)
    made = [events.OutputTranscriptDelta(str(i), 0, 80) for i in range(6)]
    for event in made[:3]:
        replay.keep(event, event.delta)
    replay.keep(events.OutputAudioDelta("AAAA"), "audio")  # never kept
    replay.parked()
    for event in made[3:]:
        replay.keep(event, event.delta)
    assert replay.missed(made[3].event_id) == ["4", "5"]
    assert replay.missed(made[0].event_id) == ["2", "3", "4", "5"]  # 0 is gone: all that is kept came after
    replay.parked()
    assert replay.missed("") == []  # nothing made since
    replay.parked()
    replay.keep(made[0], "again")
    assert replay.missed("") == ["again"]


async def test_a_drains_deadline_ends_a_parked_session_as_a_live_one() -> None:
    async with pods.in_process("--reattach-grace-s", "60") as pod, httpx.AsyncClient() as http:
        ws, _ = await clients.started(pod.ws_url, _relay("sess_drained"))
        ws.transport.abort()
        await asyncio.sleep(0.3)
        assert (await _stats(pod))["parked"] == 1
        drained = (await http.post(pod.admin_root + "/drain", params={"deadline_s": "0.5"}, timeout=10)).json()
        assert drained["ended_at_deadline"] == 1
        async with asyncio.timeout(2):
            while (await _stats(pod))["sessions"]:
                await asyncio.sleep(0.05)
        assert (await _stats(pod))["parked"] == 0
