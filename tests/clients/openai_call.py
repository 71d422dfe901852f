"""The pinned openai SDK's own client (tests/clients/requirements.txt, 3.63) against a GPT-Live server:
run in the clients venv.

Starts with what the SDK declares (`gpt-live-1.1`, `safety_identifier`, startup history, a
`responses` delegation), streams a loud tone, appends commentary, closes; every server event is
parsed by the SDK into its typed models and checked against them strictly. Prints one JSON line.

    python openai_call.py BASE_URL SECONDS
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import sys

import openai
from openai import AsyncOpenAI
from openai.types.live import ConnectServerEvent
from pydantic import TypeAdapter

RATE = 24_000
FRAME = RATE * 80 // 1000
STRICT = TypeAdapter(ConnectServerEvent)


def tone(i: int) -> str:
    pcm = b"".join(int(12000 * math.sin(2 * math.pi * 220 * (i * FRAME + n) / RATE)).to_bytes(2, "little", signed=True)
                   for n in range(FRAME))
    return base64.b64encode(pcm).decode()


async def until_closed(conn: object, strict: TypeAdapter[object]) -> tuple[int, str]:
    """Read `conn` (the SDK's live or fork connection) to its `session.closed`, every event parsed
    strictly: the audio deltas read on the way, and the close's reason."""
    deltas = 0
    async for event in conn:  # type: ignore[attr-defined]
        strict.validate_python(event.model_dump(mode="json", exclude_unset=True))
        if event.type == "session.output_audio.delta":
            deltas += 1
        elif event.type == "session.closed":
            return deltas, event.reason
    raise RuntimeError("the connection ended without session.closed")


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("seconds", type=float)
    args = p.parse_args()
    client = AsyncOpenAI(base_url=args.base_url, api_key="local-key")
    seen: dict[str, int] = {}
    invalid: list[str] = []
    usage: list[dict] = []
    transcript = ""
    resource: dict = {}
    async with client.live.connect() as conn:
        await conn.session.start(event_id="s1", session={
            "model": "gpt-live-1.1", "safety_identifier": "user-42",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "I am Ada."}]}],
            "delegation": {"type": "responses", "responses": {"model": "gpt-5"}}})

        async def feed() -> None:
            for i in range(int(args.seconds / 0.08)):
                if i == 3:
                    await conn.session.commentary.append(content="Hello Ada", delegation_id=None, event_id="k1")
                await conn.session.input_audio.append(audio=tone(i))
                await asyncio.sleep(0.08)
            await conn.session.close(event_id="bye")

        feeder = None
        while True:
            raw = await conn.recv_bytes()
            body = json.loads(raw)
            kind = body["type"]
            seen[kind] = seen.get(kind, 0) + 1
            try:  # the SDK's models, every field declared (extra keys would be kept silently)
                event = STRICT.validate_json(raw)
                if set(body) - set(type(event).model_fields):
                    invalid.append(f"{kind}: undeclared {sorted(set(body) - set(type(event).model_fields))}")
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                invalid.append(f"{kind}: {exc}")
                continue
            if kind == "session.started":
                resource = body["session"]
                feeder = asyncio.create_task(feed())
            elif kind == "session.output_transcript.delta":
                transcript += event.delta
            elif kind == "session.usage.updated":
                usage.append(body)
            elif kind == "error":
                invalid.append(f"error: {body['error']}")
            elif kind == "session.closed":
                break
        if feeder is not None:
            await feeder
    print(json.dumps({"openai": openai.__version__, "seen": seen, "invalid": invalid, "usage": usage,
                      "transcript": transcript, "resource": resource}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
