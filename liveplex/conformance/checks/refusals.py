"""Checks 31-33: events refused by name, unknown events, and strict mute (gpt-live §4.3)."""

from __future__ import annotations

from liveplex.conformance.checklist import Check, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import Wire

REFUSED = (
    "session.update", "session.instructions.append", "session.thinking.append",
    "session.output_audio.fixture.play", "decision.create",
    "decision.item.create", "decision.item.delete", "response.item.create", "response.create",
    "transport.dtmf.send",
)
"""Valid GPT-Live client events PersonaPlex cannot honour (gpt-live §4.3); commentary it says
(check 42)."""

UNKNOWN = ("input_audio_buffer.append", "response.cancel")
"""Realtime-API events that are not GPT-Live client events."""


async def _still_streaming(w: Wire, frames: int = 3) -> None:
    before = len(w.deltas)
    while len(w.deltas) < before + frames:
        await w.recv()


async def refused_by_name(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.start()
        for i, type_ in enumerate(REFUSED):
            for payload in ({}, {"session": {"garbage": [1, 2]}, "foo": None, "audio": 7}):
                event_id = f"r{i}{'g' if payload else ''}"
                await w.send({"type": type_, "event_id": event_id, **payload})
                await w.expect_error("unsupported_event", "type", client_event_id=event_id, message_contains=type_)
        await _still_streaming(w)
        await w.assert_open()
        await w.close_session()
    return f"{len(REFUSED)} types refused, with and without a garbage payload"


async def unknown_events(ctx: Context) -> None:
    async with await ctx.wire() as w:
        await w.start()
        for type_ in UNKNOWN:
            await w.send({"type": type_, "event_id": type_})
            await w.expect_error("unknown_event", "type", client_event_id=type_, message_contains=type_)
        await _still_streaming(w)
        await w.close_session()


async def strict_mute(ctx: Context) -> None:
    async with await ctx.wire() as w:
        await w.start()
        await w.send({"type": "session.input_audio.mute", "event_id": "q1", "foo": 1})
        await w.expect_error("unknown_parameter", "foo", client_event_id="q1")
        await w.send({"type": "session.input_audio.unmute", "event_id": "u1"})
        unmuted = await w.next_event()
        expect(unmuted.get("type") == "session.input_audio.unmuted",
               f"the refused mute must not be acked; next reply was {unmuted}")
        await w.close_session()


CHECKS = (
    Check(31, "refused-events", refused_by_name),
    Check(32, "unknown-events", unknown_events),
    Check(33, "strict-mute", strict_mute),
)
