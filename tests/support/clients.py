"""Clients for tests: raw GPT-Live sockets (a start, loud audio, waiting for an event) and the official SDK."""

from __future__ import annotations

import asyncio
import base64
import time

import numpy as np
import openai
import orjson
import pytest
import websockets

from liveplex.bench import roundtrip
from liveplex.conformance import signals
from liveplex.gptlive import events
from liveplex.gptlive.server import hop
from liveplex.live import frames

START = {"type": "session.start", "event_id": "s1", "session": {"model": "gpt-live-1"}}


def _start(event_id: str | None, **session: object) -> dict:
    head = {} if event_id is None else {"event_id": event_id}
    return {"type": "session.start", **head, "session": {"model": "gpt-live-1", **session}}


_HISTORY = [{"type": "message", "role": role, "content": [{"type": part, "text": role[0] * 2000}]}
            for role, part in (("user", "input_text"), ("assistant", "output_text"), ("user", "input_text"))]
"""6,000 characters of history: past the sim's 4,096 for the role prompt, so the oldest turn is dropped."""
STARTS: dict[str, tuple[dict, tuple[str, ...]]] = {
    "a native voice": (_start("s1", instructions="Hi", audio={"output": {"voice": "NATF2"}}), ()),
    "plain": (_start("s1", instructions="Hi"), ("voice_mapped",)),  # the default voice is a built-in name
    "no event id, no instructions": (_start(None), ("voice_mapped", "default_instructions")),
    "responses delegation": (_start("s1", instructions="Hi", delegation={
        "type": "responses", "responses": {"model": "gpt-4.1"}}), ("delegation_unused", "voice_mapped")),
    "client delegation": (_start("s1", instructions="Hi", delegation={"type": "client"}), ("voice_mapped",)),
    "history dropped": (_start("s1", instructions="Hi", input=_HISTORY), ("input_truncated", "voice_mapped")),
    "g711": (_start("s1", instructions="Hi", audio={"format": {"type": "audio/pcmu", "rate": 8000},
                                                   "output": {"voice": "NATF2"}}), ()),
    "pcm 16 kHz": (_start("s1", instructions="Hi", audio={"format": {"type": "audio/pcm", "rate": 16000},
                                                         "output": {"voice": "cedar"}}), ("voice_mapped",)),
    "the rest of the fields": (_start("s1", instructions="Hi", safety_identifier="user-1", triggers=[], store=False,
                                      audio={"output": {"voice": "NATF2"}}), ()),
    "everything": (_start("s9", input=_HISTORY, delegation={"type": "responses", "responses": {"model": "gpt-4.1"}}),
                   ("input_truncated", "delegation_unused", "voice_mapped", "default_instructions")),
}
"""Every kind of `session.start` a client can send, and the `info` notes (codes, in order) that a sim
pod with `--info-events` answers it with: every note `gptlive.start` knows, alone and together."""
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


async def started(ws_url: str, headers: dict[str, str] | None = None,
                  start: dict = START) -> tuple[websockets.ClientConnection, dict]:
    """A raw socket whose session started (with `start`), and its `session.started`. What it is sent
    queues unread without bound: past websockets' default `max_queue` (16) the client stops reading
    its socket, and its `close()` then waits out its 10 s close timeout for an answer it never reads."""
    ws = await websockets.connect(ws_url, additional_headers=headers, max_queue=None)
    await ws.send(orjson.dumps(start).decode())
    event, _ = await until(ws, "session.started")
    return ws, event


async def refused(url: str, key: str) -> dict:
    """A socket refused once open (a re-attach or a fork of nothing this key has): the error it is
    told; it closes 1008."""
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        error = orjson.loads(await ws.recv())
        with pytest.raises(websockets.ConnectionClosed):
            await ws.recv()
    assert ws.close_code == 1008
    return error["error"]


SPEECH_MS = 3000


async def sdk_call(base_url: str, model: str = "gpt-live-1") -> tuple[list[bytes], str, str]:
    """3 s of loud speech in real time through `AsyncOpenAI.live.connect()`; (deltas, words, reason)."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="local-key")
    speech = signals.speech(SPEECH_MS)
    step = signals.FRAME_MS * signals.BYTES_PER_MS
    deltas: list[bytes] = []
    words: list[str] = []
    reason = ""
    async with client.live.connect() as conn:
        await conn.session.start(event_id="start", session={"model": model})

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


class StampedCall:
    """A raw GPT-Live call streaming silence in real time, each 80 ms frame stamped with its index
    (`bench.roundtrip`), so a sim's echo shows every frame played back: what a move or a rollout
    must keep whole. `stop()` closes the call and returns its summary."""

    def __init__(self, ws, started: dict) -> None:
        self.ws = ws
        self.session_id = started["session"]["id"]
        self.stamps: list[int] = []
        """Echoed frame indices, in arrival order."""
        self.others: list[dict] = []
        """Every event but the audio, in order."""
        self.arrivals: list[float] = []
        """Arrival times of the audio deltas (monotonic seconds)."""
        self.sent = 0
        self._speaking = True
        self._tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._speak())]

    @classmethod
    async def start(cls, ws_url: str, start: dict = START) -> StampedCall:
        """A call started with `start` (one in another format than 24 kHz PCM echoes no stamps)."""
        return cls(*await started(ws_url, start=start))

    async def _speak(self) -> None:
        silence = bytes(frames.FRAME_BYTES)
        due = time.monotonic()
        while self._speaking:
            chunk = roundtrip.stamp(silence, self.sent * frames.FRAME_BYTES)
            await self.ws.send(orjson.dumps({"type": "session.input_audio.append",
                                             "audio": base64.b64encode(chunk).decode()}).decode())
            self.sent += 1
            due += frames.FRAME_MS / 1000
            await asyncio.sleep(max(0.0, due - time.monotonic()))

    async def _listen(self) -> None:
        async for message in self.ws:
            event = orjson.loads(message)
            if event["type"] != "session.output_audio.delta":
                self.others.append(event)
                if event["type"] == "session.closed":
                    return
                continue
            self.arrivals.append(time.monotonic())
            index = roundtrip.index(event["delta"][:roundtrip.STAMP_B64_CHARS])
            if index is not None:
                self.stamps.append(index)

    async def stop(self, echo_s: float = 10.0) -> None:
        """Stop speaking, let the last frame echo back (within `echo_s`), close and wait for
        `session.closed`."""
        self._speaking = False
        await self._tasks[1]  # never mid-send: `sent` counts exactly what went out
        end = time.monotonic() + echo_s
        while (not self.stamps or self.stamps[-1] < self.sent - 1) and time.monotonic() < end:
            await asyncio.sleep(0.02)
        await self.ws.send(orjson.dumps({"type": "session.close"}).decode())
        await asyncio.wait_for(self._tasks[0], 10)
        await self.ws.close()

    def unbroken(self) -> bool:
        """Every frame from the first echoed to the last sent came back once, in order, and the call
        ended as asked, with no error and no second `session.started`."""
        told = [e["type"] for e in self.others if e["type"] not in STREAMED]
        return (told == ["session.closed"] and self.others[-1]["reason"] == "close_requested"
                and self.others[-1]["session"]["id"] == self.session_id and bool(self.stamps)
                and self.stamps == list(range(self.stamps[0], self.sent)))


STREAMED = frozenset({"session.usage.updated", "session.output_transcript.delta"})
"""Events a live call streams besides audio."""


async def events_while_speaking(ws: websockets.ClientConnection, seconds: float) -> tuple[list[dict], int]:
    """What a server sends over `seconds` while the caller streams loud audio in real time: its
    events, audio deltas and the hop's checkpoints left out, and how many audio deltas came."""
    seen: list[dict] = []
    deltas = 0

    async def speak() -> None:
        while True:
            await ws.send(orjson.dumps({"type": "session.input_audio.append", "audio": LOUD}).decode())
            await asyncio.sleep(0.08)

    speaking = asyncio.create_task(speak())
    try:
        async with asyncio.timeout(seconds):
            while True:
                text = await ws.recv()
                if isinstance(text, str) and text.startswith(events.AUDIO_DELTA_PREFIX):
                    deltas += 1
                elif not (isinstance(text, str) and text.startswith(hop.CHECKPOINT_PREFIX)):
                    seen.append(orjson.loads(text))
    except TimeoutError:
        pass
    finally:
        speaking.cancel()
    return seen, deltas
