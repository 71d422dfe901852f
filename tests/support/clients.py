"""Clients for tests: raw GPT-Live sockets (a start, loud audio, waiting for an event) and the official SDK."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
import openai
import orjson

from liveplex.conformance import signals

START = {"type": "session.start", "event_id": "s1", "session": {"model": "gpt-live-1"}}
LOUD = base64.b64encode((8000 * np.sin(np.arange(1920) * 0.2)).astype("<i2").tobytes()).decode()


async def until(ws, kind: str, timeout: float = 10.0) -> tuple[dict, list[dict]]:
    """Events up to and including the first of `kind`, within `timeout` seconds in all (a session
    whose deltas keep flowing fails here, not when it expires minutes later)."""
    seen = []
    async with asyncio.timeout(timeout):
        while True:
            event = orjson.loads(await ws.recv())
            seen.append(event)
            if event["type"] == kind:
                return event, seen

SPEECH_MS = 3000


async def sdk_call(base_url: str) -> tuple[list[bytes], str, str]:
    """3 s of loud speech in real time through `AsyncOpenAI.live.connect()`; (deltas, words, reason)."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="local-key")
    speech = signals.speech(SPEECH_MS)
    step = signals.FRAME_MS * signals.BYTES_PER_MS
    deltas: list[bytes] = []
    words: list[str] = []
    reason = ""
    async with client.live.connect() as conn:
        await conn.session.start(event_id="start", session={"model": "gpt-live-1"})

        async def speak() -> None:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            for i, offset in enumerate(range(0, len(speech), step)):
                await asyncio.sleep(max(0.0, t0 + i * 0.08 - loop.time()))
                await conn.session.input_audio.append(audio=signals.b64(speech[offset:offset + step]))
            await conn.session.close(event_id="bye")

        async with asyncio.TaskGroup() as group:
            async for event in conn:
                if event.type == "session.started":
                    group.create_task(speak())
                elif event.type == "session.output_audio.delta":
                    deltas.append(base64.b64decode(event.delta))
                elif event.type == "session.output_transcript.delta":
                    words.append(event.delta)
                elif event.type == "error":
                    raise AssertionError(f"error event: {event.error.code}: {event.error.message}")
                elif event.type == "session.closed":
                    reason = event.reason
                    break
    return deltas, "".join(words), reason
