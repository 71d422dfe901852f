"""A `serve --engine personaplex` pod on the tiny checkpoint, as the end-to-end twin tests run it:
its flags, and the audio a socket hears from it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import websockets


def flags(tiny_dir: Path) -> tuple[str, ...]:
    """CPU, greedy draws (a session's audio is then a function of its model state), two slots."""
    return ("--engine", "personaplex", "--model-path", str(tiny_dir), "--device", "cpu",
            "--greedy", "--max-sessions", "2")


async def audio(ws: websockets.ClientConnection, n: int) -> list[str]:
    """The next `n` audio deltas (base64, as sent), reading past other events; an error or the
    session's end on the way fails."""
    heard: list[str] = []
    async with asyncio.timeout(30):
        while len(heard) < n:
            event = orjson.loads(await ws.recv())
            assert event["type"] not in ("error", "session.closed"), event
            if event["type"] == "session.output_audio.delta":
                heard.append(event["delta"])
    return heard
