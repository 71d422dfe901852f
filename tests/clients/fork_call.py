"""The pinned openai SDK (3.63) forking a stored call (issue 45): a call started with `store: true`
speaks a tone; while it runs, `client.live.forks.connect(session_id=...)` forks it over the fork
socket (`session.start` with empty overrides: the stored settings) and the fork speaks too, every
event parsed strictly by the SDK's `ForkServerEvent`. With `--webrtc SESSION_ID OFFER_FILE`
instead, `client.live.sessions.fork` forks that stored session onto a WebRTC call from the offer
in OFFER_FILE (made by the test's aiortc caller, which takes the answer at once, as a browser
does). Run in the clients venv; prints one JSON line.

    python fork_call.py BASE_URL
    python fork_call.py BASE_URL --webrtc SESSION_ID OFFER_FILE
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from openai import AsyncOpenAI
from openai.types.live.fork_server_event import ForkServerEvent
from openai_call import STRICT, tone, until_closed  # its sibling, run from this folder
from pydantic import TypeAdapter

FORK_STRICT = TypeAdapter(ForkServerEvent)


async def _speak(send, frames: int) -> None:
    for i in range(frames):
        await send(audio=tone(i))
        await asyncio.sleep(0.08)


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("--webrtc", nargs=2, metavar=("SESSION_ID", "OFFER_FILE"))
    args = p.parse_args()
    client = AsyncOpenAI(base_url=args.base_url, api_key="local-key", max_retries=0)
    out: dict[str, object] = {}
    if args.webrtc:
        session_id, offer_file = args.webrtc
        created = await client.live.sessions.fork(
            session_id, transport={"type": "webrtc", "sdp": Path(offer_file).read_text()}, session={"store": False})
        print(json.dumps({"id": created.session.id, "sdp": created.transport.sdp}))
        return 0
    async with client.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1", "instructions": "Be brief.", "store": True})
        started = await conn.recv()
        STRICT.validate_python(started.model_dump(mode="json", exclude_unset=True))
        session_id = started.session.id
        await _speak(conn.session.input_audio.append, 20)
        await asyncio.sleep(1.0)  # the store has the call so far
        async with client.live.forks.connect(session_id=session_id) as fork:
            await fork.session.start(session={})
            forked = await fork.recv()
            FORK_STRICT.validate_python(forked.model_dump(mode="json", exclude_unset=True))
            assert forked.type == "session.started"
            out["fork"] = {"id": forked.session.id, "model": forked.session.model,
                           "instructions": forked.session.instructions, "store": forked.session.store}
            await _speak(fork.session.input_audio.append, 12)
            await fork.session.close()
            out["fork_deltas"], out["fork_reason"] = await until_closed(fork, FORK_STRICT)
        out["original"] = session_id
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
