"""Checks 27 and 38-40: what no socket ever saw, large messages, and the official SDK clients."""

from __future__ import annotations

import asyncio
import base64

import openai

from liveplex.conformance import frames, signals
from liveplex.conformance.checklist import Check, Failed, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import DEFAULT_MODEL

LARGE_MESSAGE_BYTES = 1_572_864
"""gpt-live §14.39: 1.5 MiB, above the websockets default limit of 1 MiB."""

SDK_AUDIO_S = 2.0
"""gpt-live §14.40: the smoke clients receive 2 s of model audio."""


def _summary(ctx: Context, rules: frozenset[frames.Rule] | None) -> str:
    ledger = ctx.ledger
    found = [(n, p, x) for n, p, x in ledger.problems if rules is None or p.rule in rules]
    if found:
        n, problem, excerpt = found[0]
        raise Failed(f"{len(found)} violations, first in check {n}: {problem}; frame: {excerpt}")
    return f"{ledger.frames} frames on {ledger.sockets} sockets"


async def never_seen(ctx: Context) -> str:
    return _summary(ctx, frozenset({frames.Rule.NEVER_EMITTED}))


async def strict_schema(ctx: Context) -> str:
    return _summary(ctx, None) + " all valid"


async def large_message(ctx: Context) -> str:
    raw = signals.speech(LARGE_MESSAGE_BYTES * 3 // 4 // signals.BYTES_PER_MS)
    async with await ctx.wire() as w:
        await w.start()
        await w.append(raw)
        await w.send({"type": "session.input_audio.mute", "event_id": "after"})
        await w.expect("session.input_audio.muted", client_event_id="after")
        await w.close_session()
    return f"{len(signals.b64(raw)) / 2**20:.2f} MiB append accepted"


def _sync_smoke(base_url: str, api_key: str) -> tuple[int, str]:
    """The sync SDK client: start, 2 s of model audio, close; (audio bytes, close reason)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    received, reason = 0, ""
    frame = signals.b64(signals.silence(signals.FRAME_MS))
    with client.live.connect() as conn:
        conn.session.start(event_id="start", session={"model": DEFAULT_MODEL})
        for event in conn:
            if event.type == "session.started" or event.type == "session.output_audio.delta":
                if event.type == "session.output_audio.delta":
                    received += len(base64.b64decode(event.delta))
                conn.session.input_audio.append(audio=frame)
                if received >= SDK_AUDIO_S * 48_000 and not reason:
                    conn.session.close(event_id="bye")
                    reason = "closing"
            elif event.type == "error":
                raise Failed(f"sync SDK client got an error: {event.error.code}: {event.error.message}")
            elif event.type == "session.closed":
                reason = event.reason
                break
    return received, reason


async def _async_smoke(base_url: str, api_key: str) -> tuple[int, str]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
    received, reason = 0, ""
    frame = signals.b64(signals.silence(signals.FRAME_MS))
    async with client.live.connect() as conn:
        await conn.session.start(event_id="start", session={"model": DEFAULT_MODEL})
        async for event in conn:
            if event.type in ("session.started", "session.output_audio.delta"):
                if event.type == "session.output_audio.delta":
                    received += len(base64.b64decode(event.delta))
                await conn.session.input_audio.append(audio=frame)
                if received >= SDK_AUDIO_S * 48_000 and not reason:
                    await conn.session.close(event_id="bye")
                    reason = "closing"
            elif event.type == "error":
                raise Failed(f"async SDK client got an error: {event.error.code}: {event.error.message}")
            elif event.type == "session.closed":
                reason = event.reason
                break
    return received, reason


def _sync_dispatch(base_url: str, api_key: str) -> list[str]:
    """`dispatch_events()` with an "error" handler: a refusal reaches it; the loop ends after close."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    errors: list[str] = []
    with client.live.connect() as conn:
        conn.on("session.started", lambda _event: conn.session.update(session={}, event_id="upd"))

        def on_error(event: object) -> None:
            errors.append(event.error.code)  # type: ignore[attr-defined]
            conn.session.close()

        conn.on("error", on_error)
        conn.session.start(session={"model": DEFAULT_MODEL})
        conn.dispatch_events()
    return errors


async def sdk_clients(ctx: Context) -> str:
    base, key = ctx.options.base_url, ctx.options.bearer
    (sync_bytes, sync_reason), (async_bytes, async_reason), errors = await asyncio.gather(
        asyncio.to_thread(_sync_smoke, base, key), _async_smoke(base, key),
        asyncio.to_thread(_sync_dispatch, base, key))
    for name, got, reason in (("sync", sync_bytes, sync_reason), ("async", async_bytes, async_reason)):
        expect(got >= SDK_AUDIO_S * 48_000, f"{name} SDK client received {got} bytes of audio")
        expect(reason == "close_requested", f"{name} SDK client ended with {reason!r}")
    expect(errors == ["unsupported_event"], f"dispatch_events error handler saw {errors}")
    return f"sync and async clients streamed ≥ {SDK_AUDIO_S:g} s; dispatch_events saw unsupported_event"


CHECKS = (
    Check(27, "never-emitted", never_seen, final=True),
    Check(38, "strict-schema", strict_schema, final=True),
    Check(39, "large-message", large_message, seconds=3.0),
    Check(40, "sdk-clients", sdk_clients, seconds=4.0),
)
