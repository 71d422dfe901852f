"""Check 43: stored sessions (openai 3.63 `SessionConfig.store`, `sessions.download_recording`;
docs/storage.md).

A server either stores (`session.started.session.store` true) or refuses `store: true` by name
(`unsupported_value` on `session.store`), never starts an unstored session silently; check 13
holds both. Against a server that stores, this check goes on: a stored call's recording, fetched
as the SDK fetches it after the call, is a WAV of the call: 2 channels (the caller, the agent),
24 kHz, 16-bit, one 80 ms frame per audio delta the caller got; an unknown id, and a session
another API key started, are one 404 `session_not_found` on `session_id`.
"""

from __future__ import annotations

import asyncio
import io
import secrets
import wave

import httpx

from liveplex.conformance import signals
from liveplex.conformance.checklist import Check, Failed, Skipped, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import DEFAULT_MODEL, Json, Wire, brief

SPOKEN_MS = 1200
"""The stored call's caller audio, at real-time pace."""
CHANNELS = 2
SAMPLE_WIDTH = 2
FRAME_SAMPLES = signals.SAMPLE_RATE * signals.FRAME_MS // 1000
"""One 80 ms delta's samples in the recording (each channel)."""
CONTENT_PATH = "/live/sessions/{session_id}/content"
"""The recording, under the `/v1` base (the SDK's `download_recording`)."""


async def start_stored(w: Wire, instructions: str | None = None) -> Json | None:
    """Start a session with `store: true` (and `instructions` when given) on `w`: its resource
    when the server stores it (which must say `store` true); None when the server refused it by
    name."""
    session: Json = {"model": DEFAULT_MODEL, "store": True}
    if instructions is not None:
        session["instructions"] = instructions
    await w.send({"type": "session.start", "event_id": "store", "session": session})
    event = await w.next_event()
    if event.get("type") == "error":
        body = event["error"]
        assert isinstance(body, dict)
        expect((body.get("code"), body.get("param")) == ("unsupported_value", "session.store"),
               f"store: true refused as {brief(event)}, expected unsupported_value on session.store")
        return None
    expect(event.get("type") == "session.started", f"store: true answered {brief(event)}")
    resource = event["session"]
    assert isinstance(resource, dict)
    expect(resource.get("store") is True, f"a stored session's resource says store {resource.get('store')!r}")
    return resource


async def stored_or_skip(ctx: Context, w: Wire, instructions: str | None = None) -> Json:
    """`start_stored` for a check that needs a stored session: a server that stores nothing skips
    it, or fails it when `--expect-store` says the server stores."""
    resource = await start_stored(w, instructions)
    if resource is None:
        expect(not ctx.options.expect_store, "store: true refused by name, but --expect-store says it stores")
        raise Skipped("the server stores nothing (store: true refused by name): run a gateway with "
                      "--store-dir DIR and pass --expect-store")
    return resource


async def _recording(ctx: Context, http: httpx.AsyncClient, url: str, samples: int) -> tuple[int, int, int, int]:
    """The download's (channels, rate, sample width, samples a channel), fetched again until it
    holds `samples` or `--timeout` passed: the call's last seconds are written as it ends."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ctx.options.timeout_s
    while True:
        got = await http.get(url, headers={**ctx.headers(), "Accept": "application/binary"})
        expect(got.status_code == 200, f"GET {url}: {got.status_code} {got.text[:200]}")
        kind = got.headers.get("content-type", "")
        expect(kind.startswith("audio/wav"), f"GET {url}: content-type {kind!r}, expected audio/wav")
        try:
            with wave.open(io.BytesIO(got.content)) as wav:
                found = (wav.getnchannels(), wav.getframerate(), wav.getsampwidth(), wav.getnframes())
        except (wave.Error, EOFError) as exc:
            raise Failed(f"GET {url}: not a WAV ({exc}): {got.content[:16]!r}") from None
        if found[3] >= samples or loop.time() > deadline:
            return found
        await asyncio.sleep(0.2)


async def _not_found(ctx: Context, http: httpx.AsyncClient, url: str, bearer: str, what: str) -> None:
    got = await http.get(url, headers={**ctx.headers(bearer), "Accept": "application/binary"})
    try:
        body = got.json().get("error", {})
    except ValueError:
        body = {}
    expect(got.status_code == 404 and (body.get("code"), body.get("param")) == ("session_not_found", "session_id"),
           f"{what}: GET {url} answered {got.status_code} {got.text[:200]}, expected 404 session_not_found "
           "on session_id")


async def stored(ctx: Context) -> str:
    async with await ctx.wire() as w:
        resource = await stored_or_skip(ctx, w)
        session_id = str(resource.get("id"))
        await w.play(signals.speech(SPOKEN_MS))
        await w.close_session()
    samples = len(w.deltas) * FRAME_SAMPLES
    base = ctx.options.base_url.rstrip("/")
    async with httpx.AsyncClient(timeout=ctx.options.timeout_s) as http:
        channels, rate, width, got = await _recording(ctx, http, base + CONTENT_PATH.format(session_id=session_id),
                                                      samples)
        expect((channels, rate, width) == (CHANNELS, signals.SAMPLE_RATE, SAMPLE_WIDTH),
               f"the recording is {channels} channels at {rate} Hz, {8 * width}-bit; expected 2 at 24000, 16-bit")
        expect(got == samples, f"the recording holds {got} samples a channel; the call's {len(w.deltas)} "
               f"deltas make {samples}")
        unknown = f"sess_{secrets.token_hex(12)}"
        await _not_found(ctx, http, base + CONTENT_PATH.format(session_id=unknown), ctx.options.bearer, "an unknown id")
        other = ctx.options.other_api_key
        if other is not None:
            await _not_found(ctx, http, base + CONTENT_PATH.format(session_id=session_id), other, "another key")
    done = f"{len(w.deltas)} frames recorded, 2 channels at 24 kHz; an unknown id is 404"
    return done + ("; so is another key's" if other is not None else "; pass --other-api-key for another key's 404")


CHECKS = (Check(43, "stored", stored, seconds=3.0),)
