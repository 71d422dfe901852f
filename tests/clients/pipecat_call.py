"""A Pipecat pipeline with `OpenAILiveLLMService` against a GPT-Live server: run in the clients venv.

The context carries chat history and ends with a developer message (Pipecat's opening instruction,
sent as `session.commentary.append` once the session starts); `--responses` adds a
`ResponsesDelegation`. A loud tone streams in real time as `InputAudioRawFrame`s; the pipeline's
output frames are counted. Prints one JSON line.

    python pipecat_call.py WS_URL SECONDS [--responses]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys

from pipecat.frames.frames import (
    ErrorFrame,
    InputAudioRawFrame,
    LLMContextFrame,
    SpeechOutputAudioRawFrame,
    TTSTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.services.openai.live.llm import OpenAILiveLLMService
from pipecat.services.openai.responses.llm import OpenAIResponsesLLMSettings
from pipecat.tests.utils import SleepFrame, run_test

RATE = 24_000
CHUNK = RATE // 50


def tone(i: int) -> bytes:
    return b"".join(int(12000 * math.sin(2 * math.pi * 220 * (i * CHUNK + n) / RATE)).to_bytes(2, "little", signed=True)
                    for n in range(CHUNK))


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("ws_url")
    p.add_argument("seconds", type=float)
    p.add_argument("--responses", action="store_true")
    args = p.parse_args()
    delegation = (OpenAILiveLLMService.ResponsesDelegation(settings=OpenAIResponsesLLMSettings(model="gpt-5"))
                  if args.responses else None)
    llm = OpenAILiveLLMService(api_key="local-key", base_url=args.ws_url, delegation=delegation,
                               settings=OpenAILiveLLMService.Settings(system_instruction="You are helpful."))
    sent: list[dict] = []
    received: dict[str, int] = {}
    send = llm.send_client_event

    async def spy(event):  # the events Pipecat sends, as JSON
        sent.append(event.model_dump(exclude_none=True) if hasattr(event, "model_dump") else dict(event))
        return await send(event)

    llm.send_client_event = spy  # type: ignore[method-assign]

    @llm.event_handler("on_session_started")
    async def _started(_service, _session) -> None:
        received["on_session_started"] = received.get("on_session_started", 0) + 1

    context = LLMContext(messages=[
        {"role": "user", "content": "Hi, I am Ada."},
        {"role": "assistant", "content": "Hello Ada!"},
        {"role": "developer", "content": "Greet Ada by name."},
    ])
    frames: list = [LLMContextFrame(context=context), SleepFrame(sleep=1.0)]
    for i in range(int(args.seconds / 0.02)):
        frames += [InputAudioRawFrame(audio=tone(i), sample_rate=RATE, num_channels=1), SleepFrame(sleep=0.02)]
    down, up = await run_test(llm, frames_to_send=frames, start_timeout=10.0)
    audio = [f for f in down if isinstance(f, SpeechOutputAudioRawFrame)]
    text = "".join(f.text for f in down if isinstance(f, TTSTextFrame))
    errors = [f.error for f in [*down, *up] if isinstance(f, ErrorFrame)]
    print(json.dumps({"out_frames": len(audio), "out_loud": sum(any(f.audio[::97]) for f in audio),
                      "text": text, "errors": errors, "received": received,
                      "sent_types": sorted({e.get("type", "?") for e in sent}),
                      "start": next((e for e in sent if e.get("type") == "session.start"), None)}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
