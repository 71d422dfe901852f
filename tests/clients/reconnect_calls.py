"""Calls that survive their gateway, as the official SDK makes them (openai >= 3.63): run in the
clients venv. N calls through `client.live.connect(on_reconnecting=...)`, each streaming a loud
tone in real time; the handler hands the SDK `?session_id=` (and, with `--last-event-id`, the last
server event the call saw) for its next attempt, as docs/clients.md shows. Nothing else: the SDK
reconnects, queues what is sent meanwhile and flushes it on the new socket.

Talks with the test over lines of JSON on stdout, and takes one word on stdin:

    {"ready": [ids]}                   every call started and hears audio
    {"resumed": i, "gap_s": g}         call i hears audio again after a reconnect (g: the silence
                                       it heard, last delta before the drop to the first after)
    end        (stdin)                 every call stops talking, closes, and waits for session.closed
    {"calls": [...]}                   what each call saw (the last line)

    python reconnect_calls.py BASE_URL N --starts-per-s R [--key KEY] [--ready-s S] [--last-event-id]
                              [--initial-delay S]

The calls start at `--starts-per-s`, as callers arrive, not all in one instant: a gateway lets one
API key start so many a second (`--starts-per-key-per-s`, a second's worth banked) and refuses a
burst past that with `server_busy`, so the test passes the gateway's rate. Calls not heard within
`--ready-s` end the script, saying what they were told.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import sys
import threading
import time
from collections import Counter

import openai
from openai import AsyncOpenAI
from openai.types.websocket_reconnection import ReconnectingEvent
from websockets.exceptions import ConnectionClosed

RATE = 24_000
FRAME = RATE * 80 // 1000
TONE = [base64.b64encode(b"".join(
    int(12000 * math.sin(2 * math.pi * 250 * (i * FRAME + n) / RATE)).to_bytes(2, "little", signed=True)
    for n in range(FRAME))).decode() for i in range(10)]
"""A 250 Hz tone in 80 ms frames: ten frames hold whole periods, so they loop without a click."""
SAY = {"model": "gpt-live-1.1", "instructions": "You are a friendly receptionist."}


def say(line: dict) -> None:
    print(json.dumps(line), flush=True)


class Call:
    def __init__(self, index: int, client: AsyncOpenAI, last_event_id: bool, options: dict) -> None:
        self.index = index
        self.client = client
        self.with_last = last_event_id
        self.options = options
        """More of `connect()`'s arguments (`initial_delay`)."""
        self.session_id: str | None = None
        self.last_event: str | None = None
        self.events: list[dict] = []
        """Every server event but the audio: type, event_id, and usage seconds where it has them."""
        self.reconnects: list[dict] = []
        """What `on_reconnecting` was told each time: attempt, close code, the SDK's delay."""
        self.gaps: list[float] = []
        self.deltas = 0
        self.last_delta = 0.0
        self.dropped_at: float | None = None
        """When the audio stopped (the last delta before a drop), until it comes back."""
        self.send_failures: list[str] = []
        self.sent = 0
        self.closed: dict = {}
        self.heard = asyncio.Event()

    def on_reconnecting(self, event: ReconnectingEvent) -> dict:
        self.reconnects.append({"attempt": event.attempt, "close_code": event.close_code,
                                "delay": round(event.delay, 3)})
        if self.dropped_at is None:
            self.dropped_at = self.last_delta
        query = {"session_id": self.session_id}
        if self.with_last and self.last_event is not None:
            query["last_event_id"] = self.last_event
        return {"extra_query": query}

    async def run(self, end: asyncio.Event, after_s: float) -> None:
        await asyncio.sleep(after_s)
        async with self.client.live.connect(on_reconnecting=self.on_reconnecting, **self.options) as conn:
            await conn.session.start(session=SAY)
            speaker: asyncio.Task | None = None
            async for event in conn:
                if event.type == "session.output_audio.delta":
                    now = time.monotonic()
                    if self.dropped_at is not None:
                        self.gaps.append(now - self.dropped_at)
                        self.dropped_at = None
                        say({"resumed": self.index, "gap_s": round(self.gaps[-1], 3)})
                    self.last_delta = now
                    self.deltas += 1
                    if self.deltas == 5:
                        self.heard.set()
                    continue
                seen = {"type": event.type, "event_id": event.event_id}
                if event.type == "session.usage.updated":
                    seen["seconds"] = event.usage.seconds
                elif event.type == "error":
                    seen["error"] = event.error.code
                self.events.append(seen)
                self.last_event = event.event_id
                if event.type == "session.started":
                    self.session_id = self.session_id or event.session.id
                    speaker = asyncio.create_task(self.speak(conn, end))
                elif event.type == "session.closed":
                    self.closed = {"id": event.session.id, "reason": event.reason, "seconds": event.usage.seconds}
                    break
            if speaker is not None:
                await speaker

    async def speak(self, conn, end: asyncio.Event) -> None:
        """The tone in real time until `end`, then `session.close`. A send the SDK neither sends nor
        queues (the socket dropped and the SDK has not noticed yet) is counted and skipped."""
        due = time.monotonic()
        while not end.is_set():
            try:
                await conn.session.input_audio.append(audio=TONE[self.sent % len(TONE)])
            except (ConnectionClosed, openai.OpenAIError) as exc:
                self.send_failures.append(type(exc).__name__)
            self.sent += 1
            due += 0.08
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        await conn.session.close()

    def summary(self) -> dict:
        return {"session_id": self.session_id, "events": self.events, "reconnects": self.reconnects,
                "gaps": [round(g, 3) for g in self.gaps], "deltas": self.deltas, "sent": self.sent,
                "send_failures": self.send_failures, "closed": self.closed}


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("base_url")
    p.add_argument("n", type=int)
    p.add_argument("--key", default="local-key")
    p.add_argument("--last-event-id", action="store_true")
    p.add_argument("--initial-delay", type=float, help="the SDK's first backoff (default: its own, 0.5 s)")
    p.add_argument("--starts-per-s", type=float, required=True, help="calls started per second")
    p.add_argument("--ready-s", type=float, default=20.0, help="how long every call may take to start")
    p.add_argument("--limit-s", type=float, default=50.0, help="end by itself after this long")
    args = p.parse_args()
    client = AsyncOpenAI(base_url=args.base_url, api_key=args.key)
    end = asyncio.Event()
    options = {} if args.initial_delay is None else {"initial_delay": args.initial_delay}
    calls = [Call(i, client, args.last_event_id, options) for i in range(args.n)]
    running = [asyncio.create_task(c.run(end, i / args.starts_per_s)) for i, c in enumerate(calls)]
    loop = asyncio.get_running_loop()
    try:
        try:
            async with asyncio.timeout(args.ready_s):
                await asyncio.gather(*(c.heard.wait() for c in calls))
        except TimeoutError:
            told = Counter(e.get("error", e["type"]) for c in calls if not c.heard.is_set() for e in c.events)
            late = sum(not c.heard.is_set() for c in calls)
            raise SystemExit(f"{late} of {args.n} calls not heard in {args.ready_s} s; told: {dict(told)}") from None
        say({"ready": [c.session_id for c in calls]})
        word = loop.create_future()  # read by a daemon thread: nothing waits for it at exit
        threading.Thread(target=lambda: loop.call_soon_threadsafe(word.set_result, sys.stdin.readline()),
                         daemon=True).start()
        await asyncio.wait([word, *running], timeout=args.limit_s, return_when=asyncio.FIRST_COMPLETED)
        end.set()
        async with asyncio.timeout(15):
            await asyncio.gather(*running)
    finally:
        end.set()
        failed = [repr(t.exception()) for t in running if t.done() and not t.cancelled() and t.exception()]
        say({"openai": openai.__version__, "calls": [c.summary() for c in calls], "failed": failed})
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
