"""Checks 34-37: closing, expiry and engine faults (gpt-live §9)."""

from __future__ import annotations

import asyncio
import time

from liveplex.conformance import signals
from liveplex.conformance.checklist import Check, Skipped, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import brief

CLOSE_WITHIN_S = 2.08
"""gpt-live §14.34: close grace 2 s plus one frame."""

MAX_EXPIRY_S = 10.0
"""The expiry check runs only against servers with a session limit this short."""

EXPIRY_LAG_S = 0.5
"""How late past `expires_at`'s whole second the close may come: ticks and delivery run late on a
loaded machine (a full 2-core test run: a tiny PersonaPlex closed 1.00 s after, on time)."""


async def close(ctx: Context) -> str:
    loop = asyncio.get_running_loop()
    async with await ctx.wire() as w:
        started = await w.start()
        await w.play(signals.speech(1000))
        usages = [r.event["usage"]["seconds"] for r in w.log
                  if r.event.get("type") == "session.usage.updated"]
        sent_at = loop.time()
        await w.send({"type": "session.close", "event_id": "c1"})
        closed = await w.expect("session.closed", client_event_id="c1")
        code = await w.ended(CLOSE_WITHIN_S)
        took = loop.time() - sent_at
    expect(closed.get("reason") == "close_requested", f"reason {closed.get('reason')!r}")
    expect(closed.get("session") == started.get("session"),
           f"session.closed.session differs from session.started.session: {brief(closed)}")
    final = closed["usage"]["seconds"]
    expect(all(final >= u for u in usages), f"final usage {final} below an earlier value {usages}")
    expect(code == 1000, f"close code {code}, expected 1000")
    expect(took <= CLOSE_WITHIN_S, f"close took {took:.2f} s, more than {CLOSE_WITHIN_S} s")
    return f"closed in {took * 1000:.0f} ms, usage {final} s"


async def closing_state(ctx: Context) -> None:
    async with await ctx.wire() as w:
        await w.start()
        await w.send_together({"type": "session.close", "event_id": "c1"},
                              {"type": "session.input_audio.append", "audio": signals.b64(signals.speech(80)),
                               "event_id": "late-append"},
                              {"type": "session.input_audio.mute", "event_id": "m1"})
        await w.expect_error("session_closing", "type", client_event_id="m1")
        await w.expect("session.closed", client_event_id="c1")
        expect(await w.ended(ctx.options.timeout_s) == 1000, "close code is not 1000")


async def expiry(ctx: Context) -> str:
    max_seconds = ctx.target.max_seconds
    if max_seconds is None or max_seconds > MAX_EXPIRY_S:
        raise Skipped(f"max_seconds {max_seconds} > {MAX_EXPIRY_S:g}; start the server with --max-seconds 5 "
                      "(pass --expect-max-seconds 5 if /live/config does not say)")
    async with await ctx.wire() as w:
        started = await w.start()
        expires_at = started["session"]["expires_at"]
        speaker = asyncio.create_task(w.play(signals.speech(int((max_seconds + 2) * 1000))))
        try:
            closed = await w.expect("session.closed", timeout_s=max_seconds + ctx.options.timeout_s)
            ended_at = time.time()
            code = await w.ended(ctx.options.timeout_s)
        finally:
            speaker.cancel()
    expect(closed.get("reason") == "expired", f"reason {closed.get('reason')!r}, expected expired")
    # max_frames = frames_in(max_seconds) can end up to one frame before `expires_at`
    # (floor(start) + max_seconds), so one frame of slack below it.
    early = expires_at - ended_at
    expect(early <= signals.FRAME_MS / 1000, f"session.closed came {early:.2f} s before expires_at")
    # `expires_at` is whole seconds (floor(start) + max_seconds): the close is up to 1 s after it
    # by rounding alone, plus the tick and delivery lag.
    late = ended_at - expires_at
    expect(late <= 1.0 + EXPIRY_LAG_S, f"session.closed came {late:.2f} s after expires_at")
    want = round(signals.frames_in(max_seconds * 1000) * 0.08, 2)
    got = closed["usage"]["seconds"]
    expect(got == want, f"usage.seconds {got}, expected frames_in({max_seconds:g} s) × 0.08 = {want}")
    expect(code == 1000, f"close code {code}, expected 1000")
    return f"expired {ended_at - expires_at:+.2f} s from expires_at with usage {got} s"


async def fault(ctx: Context) -> str:
    if not ctx.options.expect_fault:
        raise Skipped("pass --expect-fault against a server started with --fail-after-ticks N")
    async with await ctx.wire() as w:
        await w.start()
        error = await w.next_event(ctx.options.timeout_s * 3)
        expect(error.get("type") == "error" and error["error"].get("code") == "server_error"
               and error["error"].get("type") == "server_error",
               f"expected error server_error, got {brief(error)}")
        closed = await w.expect("session.closed")
        expect(closed.get("reason") == "connection_lost", f"reason {closed.get('reason')!r}")
        code = await w.ended(ctx.options.timeout_s)
    expect(code == 1011, f"close code {code}, expected 1011")
    return "server_error, connection_lost, close 1011"


CHECKS = (
    Check(34, "close", close, seconds=3.5),
    Check(35, "closing-state", closing_state),
    Check(36, "expiry", expiry, seconds=8.0),
    Check(37, "engine-fault", fault, alone=True, seconds=5.0),
)
