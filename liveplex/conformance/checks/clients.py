"""Checks 27 and 38-40: what no socket ever saw, large messages, and the official SDK clients."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, cast

import openai

from liveplex.conformance import frames, signals
from liveplex.conformance.checklist import Check, Failed, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import DEFAULT_MODEL

LARGE_MESSAGE_BYTES = 1_572_864
"""gpt-live §14.39: 1.5 MiB, above the websockets default limit of 1 MiB."""

SDK_AUDIO_S = 2.0
"""gpt-live §14.40: the smoke clients receive 2 s of model audio."""

T = TypeVar("T")


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

    def on(self, event: Any) -> tuple[bool, bool, bool]:
        """(append a frame, send close, stop) for one event (one of the SDK's event models)."""
        kind = getattr(event, "type", None)
        if kind in ("session.started", "session.output_audio.delta"):
            if kind == "session.output_audio.delta":
                self.received += len(base64.b64decode(event.delta))
            close = self.received >= SDK_AUDIO_S * 48_000 and not self.reason
            if close:
                self.reason = "closing"
            return True, close, False
        if kind == "error":
            error = event.error
            raise Failed(f"{self.label} SDK client got an error: {error.code}: {error.message}")
        if kind == "session.closed":
            self.reason = event.reason
            return False, False, True
        return False, False, False


class _Watchdog:
    """Closes a sync SDK connection after `seconds`: a thread cannot be cancelled, and one waiting
    on a silent server kept `liveplex check` from ever exiting."""

    def __init__(self, conn: Any, seconds: float) -> None:
        self.fired = False
        self._conn = conn
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        self._conn.close()

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._timer.cancel()


async def _in_thread(fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` on a daemon thread: unlike `asyncio.to_thread`'s, a thread still running when the
    run ends cannot keep the process alive."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(cast(T, result))  # no error: `fn` returned

    def work() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # handed to the awaiting check
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, daemon=True).start()
    return await done


def _sync_smoke(base_url: str, api_key: str, seconds: float) -> tuple[int, str]:
    """The sync SDK client: start, 2 s of model audio, close, all within `seconds`; (audio bytes,
    close reason)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    smoke, frame = _Smoke("sync"), signals.b64(signals.silence(signals.FRAME_MS))
    with client.live.connect() as conn, _Watchdog(conn, seconds) as watchdog:
        conn.session.start(event_id="start", session={"model": DEFAULT_MODEL})
        for event in conn:
            append, close, stop = smoke.on(event)
            if append:
                conn.session.input_audio.append(audio=frame)
            if close:
                conn.session.close(event_id="bye")
            if stop:
                break
    if watchdog.fired:
        raise Failed(f"sync SDK client: no session.closed within {seconds:.1f} s")
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


def _sync_dispatch(base_url: str, api_key: str, seconds: float) -> list[str]:
    """`dispatch_events()` with an "error" handler, within `seconds`: the refused `session.update`
    reaches it and its `session.close` ends the session. Any other error closes the socket: closing
    the session on every error loops forever once the start is refused (`server_busy`, then each
    close's `session_not_started`)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    errors: list[str] = []
    with client.live.connect() as conn, _Watchdog(conn, seconds):
        conn.on("session.started", lambda _event: conn.session.update(session={}, event_id="upd"))

        def on_error(event: Any) -> None:
            errors.append(event.error.code)
            if errors == ["unsupported_event"]:
                conn.session.close()
            else:
                conn.close()

        conn.on("error", on_error)
        conn.session.start(session={"model": DEFAULT_MODEL})
        conn.dispatch_events()
    return errors


async def sdk_clients(ctx: Context) -> str:
    base, key = ctx.options.base_url, ctx.options.bearer

    async def in_slot(client: Callable[[str, str, float], T]) -> T:
        async with ctx.slot():
            left = ctx.deadline.remaining() if ctx.deadline is not None else None
            seconds = ctx.options.timeout_s + 2 * SDK_AUDIO_S if left is None else left
            return await _in_thread(client, base, key, max(seconds, 0.1))

    async def async_in_slot() -> tuple[int, str]:
        async with ctx.slot():
            return await _async_smoke(base, key)

    (sync_bytes, sync_reason), (async_bytes, async_reason), errors = await asyncio.gather(
        in_slot(_sync_smoke), async_in_slot(), in_slot(_sync_dispatch))
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
