"""The pinned openai SDK (3.63) on a stored call: `store: true`, a tone, then
`client.live.sessions.hangup` and `client.live.sessions.download_recording`, every server event
parsed strictly by the SDK's own models. Run in the clients venv; prints one JSON line.

    python stored_call.py BASE_URL SECONDS
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import wave

from openai import AsyncOpenAI
from openai_call import STRICT, tone, until_closed  # its sibling, run from this folder


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("seconds", type=float)
    args = p.parse_args()
    client = AsyncOpenAI(base_url=args.base_url, api_key="local-key", max_retries=0)
    out: dict[str, object] = {}
    async with client.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1", "store": True})
        started = await conn.recv()
        STRICT.validate_python(started.model_dump(mode="json", exclude_unset=True))
        session_id = started.session.id
        out["store"] = started.session.store
        for i in range(int(args.seconds / 0.08)):
            await conn.session.input_audio.append(audio=tone(i))
            await asyncio.sleep(0.08)
        await client.live.sessions.hangup(session_id)
        out["deltas"], out["reason"] = await until_closed(conn, STRICT)
    await asyncio.sleep(0.5)  # the call's last chunk is written as it ends
    recording = await client.live.sessions.download_recording(session_id)
    with wave.open(io.BytesIO(recording.content)) as wav:
        out["wav"] = {"channels": wav.getnchannels(), "rate": wav.getframerate(), "frames": wav.getnframes(),
                      "content_type": recording.response.headers.get("content-type")}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
