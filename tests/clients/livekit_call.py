"""A LiveKit Agents call against a GPT-Live server, as a new user writes it: run in the clients venv.

`GPTLiveModel` with its default config (`delegation="responses"`), no LiveKit room: the session is
configured as `AgentSession` does it (`_update_session`), a loud tone is pushed in real time as
`rtc.AudioFrame`s, and the model's audio stream is read. Prints one JSON line: what went out, what
came back, the errors the plugin emitted, and each `session.start` it sent (to see a reconnect's
history).

    python livekit_call.py BASE_URL SECONDS [--max-session-duration S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys

from livekit import rtc
from livekit.agents import llm
from livekit.plugins.openai.realtime import GPTLiveModel

RATE = 24_000
CHUNK = RATE // 50  # 20 ms, as a LiveKit room delivers it


def tone(i: int) -> rtc.AudioFrame:
    """20 ms of a loud 220 Hz tone (loud enough for the sim's transcript)."""
    data = bytearray()
    for n in range(CHUNK):
        v = int(12000 * math.sin(2 * math.pi * 220 * (i * CHUNK + n) / RATE))
        data += v.to_bytes(2, "little", signed=True)
    return rtc.AudioFrame(data=bytes(data), sample_rate=RATE, num_channels=1, samples_per_channel=CHUNK)


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("seconds", type=float)
    p.add_argument("--max-session-duration", type=float)
    p.add_argument("--say", help="generate_reply(instructions=...) once started")
    args = p.parse_args()
    extra = {} if args.max_session_duration is None else {"max_session_duration": args.max_session_duration}
    model = GPTLiveModel(base_url=args.base_url, api_key="local-key", **extra)
    session = model.session()
    errors: list[str] = []
    reconnects = 0
    starts: list[dict] = []
    received: dict[str, int] = {}
    sent_ws = session._ws_send

    async def spy(ws, event):  # the events the plugin sends, as JSON (starts kept whole)
        raw = event if isinstance(event, dict) else event.model_dump(exclude_none=True)
        if raw.get("type") == "session.start":
            starts.append(raw)
        return await sent_ws(ws, event)

    def on_event(event: dict) -> None:
        received[event.get("type", "?")] = received.get(event.get("type", "?"), 0) + 1

    def on_reconnected(_event: object) -> None:
        nonlocal reconnects
        reconnects += 1

    session._ws_send = spy  # type: ignore[method-assign]
    session.on("error", lambda e: errors.append(repr(e.error)))
    session.on("session_reconnected", on_reconnected)
    session.on("openai_server_event_received", on_event)
    chat = llm.ChatContext.empty()
    chat.add_message(role="user", content="Hello, my name is Ada.")
    chat.add_message(role="assistant", content="Hi Ada, how can I help?")
    await session._update_session(instructions="You are a helpful assistant.", chat_ctx=chat)

    out = {"frames": 0, "loud": 0}

    async def read() -> None:
        async for frame in session.audio_stream:
            samples = memoryview(frame.frame.data).cast("B")
            out["frames"] += 1
            if any(samples[i] for i in range(0, len(samples), 97)):
                out["loud"] += 1

    reader = asyncio.create_task(read())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    i = 0
    said = False
    while loop.time() - t0 < args.seconds:
        session.push_audio(tone(i))
        i += 1
        if args.say and not said and received.get("session.started"):
            session._generate_reply(instructions=args.say)
            said = True
        await asyncio.sleep(max(0.0, t0 + i * 0.02 - loop.time()))
    ids = [s for s in {session.session_id}]
    await session.aclose()
    reader.cancel()
    print(json.dumps({"out_frames": out["frames"], "out_loud": out["loud"], "pushed_s": i * 0.02,
                      "errors": errors, "reconnects": reconnects, "received": received,
                      "starts": starts, "session_id": ids[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
