"""Checks 4-17: the envelope, `session.start` and SessionConfig (gpt-live §4, §5)."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import cast

from liveplex.conformance import signals
from liveplex.conformance.checklist import Check, Skipped, expect
from liveplex.conformance.checks.stored import start_stored
from liveplex.conformance.context import Context
from liveplex.conformance.wire import DEFAULT_MODEL, Json, Wire, brief

DEFAULT_VOICE = "marin"
"""Echoed when the client names no voice (gpt-live §5.4)."""

MODEL = {"model": DEFAULT_MODEL}


async def _no_session(w: Wire) -> None:
    """Nothing started: a mute gets `session_not_started`."""
    probe = w.new_id("nostart")
    await w.send({"type": "session.input_audio.mute", "event_id": probe})
    await w.expect_error("session_not_started", "type", client_event_id=probe)


async def refused_start(ctx: Context, event: dict[str, object], code: str, param: str | None) -> None:
    """On a fresh socket: `event` is refused with (code, param), nothing starts, a valid start then works."""
    async with await ctx.wire() as w:
        event_id = w.new_id("bad")
        await w.send({**event, "event_id": event_id} if "event_id" not in event else event)
        await w.expect_error(code, param, client_event_id=cast(str, event.get("event_id", event_id)))
        await _no_session(w)
        await w.start()


async def refused_sessions(ctx: Context, cases: list[tuple[dict[str, object], str, str | None]]) -> str:
    """`refused_start` for `session.start` with each session config, concurrently."""
    await asyncio.gather(*(
        refused_start(ctx, {"type": "session.start", "session": session}, code, param)
        for session, code, param in cases
    ))
    return f"{len(cases)} refusals, each followed by a successful start"


async def accepted(ctx: Context, session: dict[str, object]) -> Json:
    """Start a session with `session` on a fresh socket and close it; the started resource."""
    async with await ctx.wire() as w:
        started = await w.start(session)
        await w.close_session()
    resource = started["session"]
    assert isinstance(resource, dict)
    return resource


async def append_before_start(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.send({"type": "session.input_audio.append", "event_id": "a1",
                      "audio": signals.b64(signals.silence(80))})
        await w.expect_error("session_not_started", "type", client_event_id="a1")
        await w.assert_open()
        await w.start()
    return "session_not_started a1, then session.started"


async def unknown_type(ctx: Context) -> None:
    async with await ctx.wire() as w:
        await w.send({"type": "foo.bar"})
        await w.expect_error("unknown_event", "type", message_contains="foo.bar")
        await w.assert_open()


async def invalid_json(ctx: Context) -> None:
    async with await ctx.wire() as w:
        for frame in ("this is not json", "[1, 2, 3]", b'{"type": "session.close"}'):
            await w.send_raw(frame)
            await w.expect_error("invalid_json", None)
        await w.assert_open()


async def bad_envelope(ctx: Context) -> None:
    async with await ctx.wire() as w:
        await w.send({"event_id": "x"})
        await w.expect_error("missing_required_parameter", "type", client_event_id="x")
        await w.send({"type": "session.close", "event_id": 5})
        await w.expect_error("invalid_type", "event_id")
        await w.assert_open()


async def start_happy(ctx: Context) -> str:
    max_seconds = ctx.target.max_seconds
    async with await ctx.wire() as w:
        sent_at = time.time()
        started = await w.start(MODEL, event_id="s1")
        s = started["session"]
        assert isinstance(s, dict)
        sid = s.get("id")
        expect(isinstance(sid, str) and 0 < len(sid.encode()) <= 256, f"session.id {sid!r}")
        expect(s.get("status") == "active", f"status {s.get('status')!r}")
        expect(s.get("model") == DEFAULT_MODEL, f"model {s.get('model')!r}, expected {DEFAULT_MODEL!r}")
        if max_seconds is not None:
            expires = s.get("expires_at")
            expect(isinstance(expires, int) and abs(expires - (sent_at + max_seconds)) <= 1.0,
                   f"expires_at {expires} is not start {sent_at:.1f} + max_seconds {max_seconds:g} (±1 s)")
        audio = s.get("audio")
        expect(audio == {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": DEFAULT_VOICE}},
               f"audio {audio!r}")
        default = ctx.server.config.get("instructions")
        expect(s.get("instructions") == default,
               f"instructions {s.get('instructions')!r} differ from /live/config's {default!r}")
        await w.assert_open()
        await w.close_session()
    return f"session {sid}"


async def start_missing(ctx: Context) -> str:
    cases: list[tuple[dict[str, object], str, str | None]] = [
        ({"type": "session.start"}, "missing_required_parameter", "session"),
        ({"type": "session.start", "session": {}}, "missing_required_parameter", "session.model"),
        ({"type": "session.start", "session": {"model": "nope"}}, "model_not_found", "session.model"),
    ]
    await asyncio.gather(*(refused_start(ctx, event, code, param) for event, code, param in cases))
    return "session, session.model and an unknown model are refused"


async def unknown_fields(ctx: Context) -> str:
    start = {"type": "session.start", "session": MODEL}
    cases: list[tuple[dict[str, object], str]] = [
        ({**start, "foo": 1}, "foo"),
        ({**start, "client_event_id": "c"}, "client_event_id"),
        ({**start, "session": {**MODEL, "foo": 1}}, "session.foo"),
        ({**start, "session": {**MODEL, "audio": {"input": {}}}}, "session.audio.input"),
        ({**start, "session": {**MODEL, "audio": {"output": {"speed": 1.0}}}}, "session.audio.output.speed"),
    ]
    await asyncio.gather(*(refused_start(ctx, event, "unknown_parameter", param) for event, param in cases))
    return "5 unknown fields refused with their paths"


async def wrong_values(ctx: Context) -> str:
    return await refused_sessions(ctx, [
        ({**MODEL, "instructions": 42}, "invalid_type", "session.instructions"),
        ({**MODEL, "audio": {"format": {"type": "audio/pcm", "rate": 44100}}}, "invalid_value",
         "session.audio.format.rate"),
        ({**MODEL, "audio": {"format": {"type": "audio/wav", "rate": 24000}}}, "invalid_value",
         "session.audio.format.type"),
    ])


async def unsupported(ctx: Context) -> str:
    refused = await refused_sessions(ctx, [
        ({**MODEL, "delegation": {"type": "decisions"}}, "unsupported_value", "session.delegation.type"),
        ({**MODEL, "delegation": {"type": "foo"}}, "invalid_value", "session.delegation.type"),
        ({**MODEL, "store": "yes"}, "invalid_type", "session.store"),
        ({**MODEL, "triggers": [{"type": "foo"}]}, "unsupported_parameter", "session.triggers"),
        ({**MODEL, "client": {}}, "unsupported_parameter", "session.client"),
    ])
    return f"{refused}; {await _store_true(ctx)}"


async def _store_true(ctx: Context) -> str:
    """`store: true` (openai 3.63 `SessionConfig.store`): a server that stores sessions starts it
    and says so (`session.store` true); one that does not refuses it by name, never silently
    starts an unstored session (docs/storage.md; check 43 goes on with what is stored)."""
    async with await ctx.wire() as w:
        if await start_stored(w) is None:
            await w.start()
            return "store: true refused by name (this server stores nothing)"
        await w.close_session()
    return "store: true started a stored session (session.store true)"


async def no_ops(ctx: Context) -> str:
    default = ctx.server.config.get("instructions")
    cases: list[dict[str, object]] = [
        {"delegation": None}, {"delegation": {"type": "client"}},
        {"delegation": {"type": "client", "acknowledgement_delay_ms": 200}},
        {"input": []}, {"triggers": []}, {"store": False}, {"instructions": None}, {"instructions": "   "},
    ]
    resources = await asyncio.gather(*(accepted(ctx, {**MODEL, **case}) for case in cases))
    for case, resource in zip(cases, resources):
        if "instructions" in case:
            expect(resource.get("instructions") == default,
                   f"{case}: instructions {resource.get('instructions')!r}, expected the default {default!r}")
        delegation = case.get("delegation")
        expect(resource.get("delegation") == delegation,
               f"{case}: session.delegation {resource.get('delegation')!r} should echo {delegation!r}"
               if delegation is not None else f"{case}: a null delegation should not be echoed")
        for key in ("input", "triggers", "client"):
            expect(key not in resource, f"{case}: session.{key} should never be echoed")
        expect(resource.get("store") is False, f"{case}: session.store {resource.get('store')!r}, expected false")
    return f"{len(cases)} no-op settings accepted"


async def voices(ctx: Context) -> str:
    named = ["cedar", "NATM1", "NATM1.pt"]
    custom = ctx.options.custom_voice
    chosen: list[object] = [*named, *([{"id": custom}] if custom else [])]
    resources = await asyncio.gather(*(
        accepted(ctx, {**MODEL, "audio": {"output": {"voice": voice}}}) for voice in chosen))
    for voice, resource in zip(chosen, resources):
        echoed = resource.get("audio", {}).get("output", {}).get("voice")
        expect(echoed == voice, f"voice {voice!r} echoed as {echoed!r}")
    await refused_sessions(ctx, [
        ({**MODEL, "audio": {"output": {"voice": "nope"}}}, "invalid_value", "session.audio.output.voice"),
        ({**MODEL, "audio": {"output": {"voice": {"id": "unknown"}}}}, "invalid_value", "session.audio.output.voice"),
        ({**MODEL, "audio": {"output": {"voice": {"id": "x", "extra": 1}}}}, "unknown_parameter",
         "session.audio.output.voice.extra"),
    ])
    return "built-in, native and .pt names accepted; bad names and ids refused" + (
        f"; custom id {custom!r} accepted" if custom else " (pass --custom-voice to test a registered id)")


async def instructions_limit(ctx: Context) -> str:
    limit = ctx.server.config.get("max_instructions_chars")
    if not isinstance(limit, int):
        raise Skipped("/live/config publishes no max_instructions_chars")
    text = "🙂" * limit
    resource = await accepted(ctx, {**MODEL, "instructions": text})
    expect(resource.get("instructions") == text, "instructions at the limit were not echoed unchanged")
    await refused_sessions(ctx, [({**MODEL, "instructions": text + "🙂"}, "string_above_max_length",
                                  "session.instructions")])
    return f"{limit} code points accepted, {limit + 1} refused"


async def formats(ctx: Context) -> str:
    async def one(type_: str, rate: int) -> None:
        fmt = {"type": type_, "rate": rate}
        async with await ctx.wire() as w:
            started = await w.start({**MODEL, "audio": {"format": fmt}})
            echoed = started["session"]["audio"]["format"]
            expect(echoed == fmt, f"format {fmt} echoed as {echoed}")
            while len(w.deltas) < 5:
                await w.recv()
            sizes = {len(base64.b64decode(d.event["delta"])) for d in w.deltas[:5]}
            want = signals.DELTA_BYTES[(type_, rate)]
            expect(sizes == {want}, f"{type_}/{rate}: deltas of {sorted(sizes)} bytes, expected {want}")
            await w.close_session()

    await asyncio.gather(one("audio/pcm", 16000), one("audio/pcmu", 8000), one("audio/pcma", 8000))
    await refused_sessions(ctx, [({**MODEL, "audio": {"format": {"type": "audio/pcmu", "rate": 16000}}},
                                  "unsupported_value", "session.audio.format.rate")])
    return "pcm/16000, pcmu/8000, pcma/8000 stream 2560/640/640-byte deltas; pcmu/16000 refused"


async def second_start(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.start()
        await w.send({"type": "session.start", "event_id": "s2", "session": MODEL})
        await w.expect_error("session_already_started", "type", client_event_id="s2")
        before = len(w.deltas)
        while len(w.deltas) < before + 5:
            event = (await w.recv()).event
            expect(event.get("type") != "session.closed", f"session ended: {brief(event)}")
        await w.close_session()
    return "refused; the session kept streaming"


CHECKS = (
    Check(4, "append-before-start", append_before_start),
    Check(5, "unknown-event", unknown_type),
    Check(6, "invalid-json", invalid_json),
    Check(7, "bad-envelope", bad_envelope),
    Check(8, "start-happy", start_happy),
    Check(9, "start-missing", start_missing),
    Check(10, "unknown-fields", unknown_fields),
    Check(11, "wrong-values", wrong_values),
    Check(12, "unsupported-settings", unsupported),
    Check(13, "no-op-settings", no_ops),
    Check(14, "voices", voices),
    Check(15, "instructions-limit", instructions_limit),
    Check(16, "formats", formats),
    Check(17, "second-start", second_start),
)
