"""Checks 18-21: capacity, slot release, and what comes first (gpt-live §2.4, §8.3)."""

from __future__ import annotations

import asyncio
import contextlib

from liveplex.conformance import signals
from liveplex.conformance.checklist import Check, Failed, Skipped, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import DEFAULT_MODEL, Wire, brief

MAX_FILL = 8
"""Capacity checks fill every slot; beyond this many they SKIP (start the server with --max-sessions 1)."""

RELEASE_S = 1.0
"""gpt-live §14.19: a slot freed by a vanished client is usable within 1 s."""


def _capacity(ctx: Context) -> int:
    capacity = ctx.target.capacity
    if capacity is None or capacity > MAX_FILL:
        raise Skipped(f"server capacity {capacity} is unknown or above {MAX_FILL}; start it with "
                      "--max-sessions 1 and pass --expect-capacity 1")
    return capacity


async def _fill(ctx: Context, stack: contextlib.AsyncExitStack, n: int) -> list[Wire]:
    wires = [await stack.enter_async_context(await ctx.wire()) for _ in range(n)]
    await asyncio.gather(*(w.start() for w in wires))
    return wires


async def _start_within(w: Wire, seconds: float, event_id: str) -> int:
    """`session.start` until it is not `server_busy`, for at most `seconds`; the attempts made."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    attempts = 0
    while True:
        attempts += 1
        await w.send({"type": "session.start", "event_id": event_id, "session": {"model": DEFAULT_MODEL}})
        event = await w.next_event()
        if event.get("type") == "session.started":
            return attempts
        body = event.get("error")
        code = body.get("code") if isinstance(body, dict) else None
        expect(code == "server_busy", f"expected session.started or server_busy, got {brief(event)}")
        if loop.time() >= deadline:
            raise Failed(f"still server_busy {seconds:g} s after the slot was freed ({attempts} attempts)")
        await asyncio.sleep(0.05)  # a client's retry pace, not synchronisation


async def busy(ctx: Context) -> str:
    n = _capacity(ctx)
    async with contextlib.AsyncExitStack() as stack:
        held = await _fill(ctx, stack, n)
        w = await stack.enter_async_context(await ctx.wire())
        await w.send({"type": "session.start", "event_id": "b1", "session": {"model": DEFAULT_MODEL}})
        await w.expect_error("server_busy", None, client_event_id="b1", error_type="server_error")
        await w.send({"type": "session.input_audio.mute", "event_id": "m1"})
        await w.expect_error("session_not_started", "type", client_event_id="m1")
        expect(not w.has_ended, "the socket closed after server_busy")
        await held[0].close_session()
        attempts = await _start_within(w, RELEASE_S, "b2")
        await w.close_session()
    return f"server_busy with {n} of {n} slots taken; same socket started after the slot freed ({attempts} tries)"


async def vanished_client(ctx: Context) -> str:
    n = _capacity(ctx)
    async with contextlib.AsyncExitStack() as stack:
        held = await _fill(ctx, stack, n)
        held[0].ws.transport.abort()
        w = await stack.enter_async_context(await ctx.wire())
        attempts = await _start_within(w, RELEASE_S, "after")
        await w.close_session()
    return f"slot freed after an abrupt disconnect ({attempts} tries)"


async def started_first(ctx: Context) -> None:
    async with await ctx.wire() as w:
        await w.start()
        expect(w.log[0].event.get("type") == "session.started",
               f"first event was {brief(w.log[0].event)}")
        await w.close_session()


async def pipelining(ctx: Context) -> None:
    async with await ctx.wire() as w:
        frame = signals.b64(signals.silence(signals.FRAME_MS))
        start = {"type": "session.start", "event_id": "p0", "session": {"model": DEFAULT_MODEL}}
        appends = [{"type": "session.input_audio.append", "audio": frame}] * 5
        for event in [start, *appends]:  # sent back to back, before any reply
            await w.send(event)
        await w.expect("session.started", client_event_id="p0")
        while len(w.deltas) < 3:
            await w.recv()
        await w.close_session()


CHECKS = (
    Check(18, "server-busy", busy, alone=True, seconds=3.0),
    Check(19, "slot-release", vanished_client, alone=True, seconds=3.0),
    Check(20, "started-first", started_first),
    Check(21, "pipelining", pipelining),
)
