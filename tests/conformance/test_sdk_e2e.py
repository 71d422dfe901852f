"""The official SDK holds a session against `liveplex serve` (issue 2's end-to-end test)."""

from __future__ import annotations

import asyncio
import base64

import openai
import pytest

from liveplex.conformance import signals
from tests.conformance import servers

pytestmark = [pytest.mark.timeout(120)]

SPEECH_MS = 3000


async def _call(base_url: str) -> tuple[list[bytes], str, str]:
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


def test_the_async_sdk_streams_speech_and_hears_the_echo(tmp_path):
    with servers.serve(log=tmp_path / "serve.log") as base:
        deltas, words, reason = asyncio.run(_call(base))
    assert reason == "close_requested"
    assert {len(d) for d in deltas} == {3840}
    assert len(deltas) >= 0.7 * SPEECH_MS / signals.FRAME_MS
    # Contiguous: the echo of the speech comes back as one unbroken run of loud frames.
    loud = [i for i, d in enumerate(deltas) if any(d)]
    assert loud and loud == list(range(loud[0], loud[-1] + 1))
    assert words.startswith("I hear you")
