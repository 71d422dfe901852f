"""Hostile clients and real-time sessions on one pod, drawn by Hypothesis (issue 11): the pod does not
crash, every bad event gets the answer the protocol gives it, the real-time sessions' frames stay
contiguous, and what the pod holds for clients stays within its limits."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging

import httpx
import numpy as np
import orjson
import pytest
import websockets
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from liveplex.gptlive import connection, events
from liveplex.gptlive.server import native
from tests.gptlive.test_socket import START, send, until
from tests.support import hostile, pods

pytestmark = pytest.mark.timeout(120)

HELD_LIMIT = 256 * 1024
SPOKEN_FRAMES = 20
"""Each real-time session speaks 1.6 s."""

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | _TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
                     max_leaves=6)
_TYPES = st.sampled_from([*events.SUPPORTED, *events.REFUSED, "session.update", "nope", ""]) | _JSON
_EVENT = st.fixed_dictionaries({"type": _TYPES}, optional={
    "event_id": _JSON, "session": _JSON | st.just({"model": "nope"}), "audio": _TEXT | st.just("AAAA"),
    "extra": _JSON})
BIG = '{"type":5,"event_id":"' + "x" * 65536 + '"}'
"""Answered with 128 KB (the id is echoed twice)."""
BAD = st.one_of(
    _TEXT,  # not JSON, or not an object
    st.binary(min_size=1, max_size=20),  # a binary frame
    _EVENT.map(lambda event: orjson.dumps(event).decode()),
    st.just(None).map(lambda _: BIG),  # (a short repr)
)
"""What a hostile client sends; valid starts are taken out (`expected_answers`)."""


@dataclasses.dataclass(frozen=True)
class Hostile:
    kind: str
    """`reader` reads every answer; `mute` sends its script over and over and never reads;
    `aborter` starts and drops the TCP connection; `raw` sends a partial request line and waits."""
    script: tuple[str | bytes, ...]


HOSTILE = st.builds(Hostile, st.sampled_from(["reader", "mute", "aborter", "raw"]),
                    st.lists(BAD, min_size=1, max_size=12).map(tuple))


def expected_answers(running: pods.Running, script: tuple[str | bytes, ...]) -> tuple[list[str | bytes], list]:
    """The script without valid starts, and the (code, client_event_id) the protocol answers each
    message of it with, from a fresh `Connection` over the pod's own catalog."""
    pod = running.built.pod
    reference = connection.Connection(pod.served, pod.front.settings.protocol, 0)
    kept, answers = [], []
    for message in script:
        probe = connection.Connection(pod.served, pod.front.settings.protocol, 0)
        if any(isinstance(a, connection.Start) for a in probe.receive(message, 0, 0.0)):
            continue
        (reply,) = reference.receive(message, 0, 0.0)[:1]
        assert isinstance(reply, connection.Send) and isinstance(reply.event, events.Error)
        kept.append(message)
        answers.append((reply.event.error.code.value, reply.event.client_event_id))
    return kept, answers


async def speak(address: str) -> tuple[list[int], dict]:
    """A real-time session saying a ramp (frame i at level 100 (i + 1)); the levels heard back."""
    ramp = [base64.b64encode(np.full(1920, 100 * (i + 1), "<i2").tobytes()).decode() for i in range(SPOKEN_FRAMES)]
    async with websockets.connect(f"ws://{address}/v1/live/sessions") as ws:
        await send(ws, START)
        await until(ws, "session.started")

        async def talk() -> None:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            for i, chunk in enumerate(ramp):
                await asyncio.sleep(max(0.0, t0 + i * 0.08 - loop.time()))
                await send(ws, {"type": "session.input_audio.append", "audio": chunk})
            await send(ws, {"type": "session.close"})

        talking = asyncio.create_task(talk())
        closed, seen = await until(ws, "session.closed", timeout=20)
        await talking
    assert [e for e in seen if e["type"] == "error"] == []
    deltas = [e for e in seen if e["type"] == "session.output_audio.delta"]
    assert len(deltas) == round(closed["usage"]["seconds"] / 0.08)
    return [int(np.frombuffer(base64.b64decode(e["delta"]), "<i2")[0]) for e in deltas], closed


async def misbehave(running: pods.Running, who: Hostile) -> None:
    if who.kind == "raw":
        sock = await hostile.tcp(running.address)
        await asyncio.get_running_loop().sock_sendall(sock, b"GET /v1/live/sess")
        assert await hostile.ended(sock, 10), "a partial request was never reaped"
        sock.close()
    elif who.kind == "aborter":
        ws = await websockets.connect(running.ws_url)
        await send(ws, START)
        await until(ws, "session.started")
        for message in who.script:
            await ws.send(message)
        ws.transport.abort()
    elif who.kind == "mute":
        mute = await hostile.Mute.open(running.address)
        with contextlib.suppress(OSError, TimeoutError):  # dropped, or time is up
            async with asyncio.timeout(1.5):
                while True:
                    for message in who.script:
                        await mute.send(message)
        mute.close()
    else:
        script, answers = expected_answers(running, who.script)
        async with websockets.connect(running.ws_url, max_queue=None) as ws:
            for message in script:
                await ws.send(message)
            got = []
            async with asyncio.timeout(15):
                while len(got) < len(answers):
                    event = orjson.loads(await ws.recv())
                    assert event["type"] == "error", event
                    got.append((event["error"]["code"], event.get("client_event_id")))
        assert got == answers


async def scenario(crowd: list[Hostile], log: list[logging.LogRecord]) -> None:
    flags = ("--outbound-max-bytes", str(HELD_LIMIT), "--header-timeout-s", "0.5")
    async with pods.in_process(*flags) as running:
        front = running.built.pod.front
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                live = [s.held_bytes for s in front.sockets if isinstance(s, native.LiveSocket)]
                peak = max([peak, *live])
                await asyncio.sleep(0.01)

        watching = asyncio.create_task(watch())
        try:
            spoken = asyncio.gather(speak(running.address), speak(running.address))
            await asyncio.gather(*(misbehave(running, who) for who in crowd))
            heard = await spoken
        finally:
            watching.cancel()
        async with httpx.AsyncClient(base_url=running.root) as http:
            stats = (await http.get("/live/stats")).json()
        for levels, _closed in heard:  # contiguous: nothing reordered or repeated, nothing lost unaccounted
            loud = [level for level in levels if level]
            assert loud == sorted(loud) and len(set(loud)) == len(loud), loud
            accounted = stats["late_ticks"] + stats["dropped_samples"] // 1920
            assert len(loud) >= SPOKEN_FRAMES // 2 and loud[-1] // 100 - len(loud) <= accounted, loud
        async with websockets.connect(running.ws_url) as ws:  # still serving
            await send(ws, START)
            await until(ws, "session.started")
    assert peak <= HELD_LIMIT
    biggest_reply = 2 * 65536 + 1024
    for drop in (r for r in log if r.getMessage() == "client too slow; dropping it"):
        assert drop.held_bytes <= HELD_LIMIT + biggest_reply
    assert not [r for r in log if r.levelno >= logging.ERROR], [r.getMessage() for r in log]


@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(crowd=st.lists(HOSTILE, min_size=1, max_size=4))
@example(crowd=[Hostile("mute", (BIG,)), Hostile("reader", ("{}", b"\x00", BIG)), Hostile("raw", ())])
def test_hostile_clients_never_hurt_the_pod_or_its_real_time_sessions(crowd: list[Hostile], caplog) -> None:
    caplog.clear()
    with caplog.at_level(logging.INFO):
        asyncio.run(scenario(crowd, caplog.records))
