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


class _Smoke:
    """What a smoke client does on each event, whichever SDK client runs it: append a frame per
    frame received, close once `SDK_AUDIO_S` of model audio came, stop at `session.closed`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.received = 0
        """Bytes of model audio received."""
        self.reason = ""
        """"closing" once close was sent, then the close reason."""

    def on(self, event: object) -> tuple[bool, bool, bool]:
        """(append a frame, send close, stop) for one event."""
        kind = getattr(event, "type", None)
        if kind in ("session.started", "session.output_audio.delta"):
            if kind == "session.output_audio.delta":
                self.received += len(base64.b64decode(event.delta))  # type: ignore[attr-defined]
            close = self.received >= SDK_AUDIO_S * 48_000 and not self.reason
            if close:
                self.reason = "closing"
            return True, close, False
        if kind == "error":
            error = event.error  # type: ignore[attr-defined]
            raise Failed(f"{self.label} SDK client got an error: {error.code}: {error.message}")
        if kind == "session.closed":
            self.reason = event.reason  # type: ignore[attr-defined]
            return False, False, True
        return False, False, False


def _sync_smoke(base_url: str, api_key: str) -> tuple[int, str]:
    """The sync SDK client: start, 2 s of model audio, close; (audio bytes, close reason)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    smoke, frame = _Smoke("sync"), signals.b64(signals.silence(signals.FRAME_MS))
    with client.live.connect() as conn:
        conn.session.start(event_id="start", session={"model": DEFAULT_MODEL})
        for event in conn:
            append, close, stop = smoke.on(event)
            if append:
                conn.session.input_audio.append(audio=frame)
            if close:
                conn.session.close(event_id="bye")
            if stop:
                break
    return smoke.received, smoke.reason


async def _async_smoke(base_url: str, api_key: str) -> tuple[int, str]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
    smoke, frame = _Smoke("async"), signals.b64(signals.silence(signals.FRAME_MS))
    async with client.live.connect() as conn:
        await conn.session.start(event_id="start", session={"model": DEFAULT_MODEL})
        async for event in conn:
            append, close, stop = smoke.on(event)
            if append:
                await conn.session.input_audio.append(audio=frame)
            if close:
                await conn.session.close(event_id="bye")
            if stop:
                break
    return smoke.received, smoke.reason


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
