"""TEMPORARY stand-in pod until `liveplex serve` exists: static page, config, stats, echo socket."""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import sys

import numpy as np
import uvicorn
from fastapi import FastAPI, WebSocket
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from liveplex.sim_pod import echo as echo_mod

STATIC = pathlib.Path(__file__).resolve().parents[2] / "liveplex" / "gptlive" / "static"
app = FastAPI()
app.mount("/static", StaticFiles(directory=STATIC), name="static")
counters = {"sessions": 0, "max_sessions": 4, "frame_ms": 80, "ticks": 0, "tick_busy_us": 0,
            "last_tick_us": 0, "late_ticks": 0}


@app.get("/")
def index() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@app.get("/live/config")
def config() -> dict:
    return {"model": "liveplex-sim", "sample_rate": 24000, "frame_ms": 80,
            "voices": ["NATF2", "NATM1", "marin", "cedar"], "voice": "marin",
            "instructions": "You echo the caller.", "max_instructions_chars": 200, "max_seconds": 240}


@app.get("/live/stats")
def stats() -> dict:
    return counters


@app.websocket("/v1/live/sessions")
async def live(ws: WebSocket) -> None:
    await ws.accept()
    msg = json.loads(await ws.receive_text())
    await ws.send_text(json.dumps({"type": "session.started", "event_id": "e0", "client_event_id": msg["event_id"],
                                   "session": {"id": "sess_standin", "model": "liveplex-sim"}}))
    buf = bytearray()
    e = echo_mod.Echo(1920, 6, 6)
    closing = None
    counters["sessions"] += 1

    async def reader() -> None:
        nonlocal closing
        while True:
            m = json.loads(await ws.receive_text())
            if m["type"] == "session.input_audio.append":
                buf.extend(base64.b64decode(m["audio"]))
            elif m["type"] == "session.close":
                closing = m["event_id"]
                return
            elif m["type"] in ("session.input_audio.mute", "session.input_audio.unmute"):
                await ws.send_text(json.dumps({"type": m["type"].replace("mute", "muted"), "event_id": "x"}))

    task = asyncio.create_task(reader())
    n = 0
    try:
        while closing is None:
            await asyncio.sleep(0.08)
            counters["ticks"] += 1
            counters["tick_busy_us"] += 50
            chunk = bytes(buf[:3840]) if len(buf) >= 3840 else bytes(3840)
            del buf[:3840]
            out, word = e.step(np.frombuffer(chunk, np.int16).astype(np.float32) / 32768)
            await ws.send_text(json.dumps({"type": "session.output_audio.delta",
                                           "delta": base64.b64encode((out * 32767).astype(np.int16).tobytes()).decode()}))
            if word:
                await ws.send_text(json.dumps({"type": "session.output_transcript.delta", "event_id": f"t{n}",
                                               "delta": word, "start_ms": 80 * n, "end_ms": 80 * n + 80}))
            n += 1
        await ws.send_text(json.dumps({"type": "session.closed", "event_id": "z", "client_event_id": closing,
                                       "reason": "close_requested", "usage": {"seconds": round(n * 0.08, 2)},
                                       "session": {"id": "sess_standin"}}))
        await ws.close(1000)
    finally:
        task.cancel()
        counters["sessions"] -= 1


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
