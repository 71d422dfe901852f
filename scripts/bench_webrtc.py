"""WebRTC calls against WebSocket calls through one gateway, side by side (docs/webrtc.md, docs/bench.md).

A throwaway redis-server, one sim pod and a gateway, all on loopback. Two phases of `--calls`
callers for `--seconds` each, one transport at a time, every caller saying a 440 Hz tone in real
time (WebSocket: 80 ms `session.input_audio.append` chunks of 24 kHz PCM; WebRTC: an aiortc peer,
Opus at 48 kHz): the gateway's CPU seconds per second of call (its process CPU clock over the
steady window) and the round trip each caller hears (from the tone's first sample sent to the
first loud audio heard back: the sim's 480 ms echo, the pod's jitter buffer, and the transport
both ways). The clients run in this process, so their own CPU (aiortc is Python) shares the
machine: compare the two phases of one run, not runs on different machines. JSON on stdout.

    .venv/bin/python scripts/bench_webrtc.py [--calls 4] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import fractions
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np
import openai
import websockets
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from liveplex.bench.target import Target

HZ = 440.0
ONSET_S = 1.0
"""Each caller is silent this long after its session started, then says the tone."""
LOUD = 2000
"""Heard audio louder than this (peak) is the echo of the tone."""
MODEL = {"model": "gpt-live-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        time.sleep(0.1)
    raise RuntimeError(f"not ready: {url}")


@contextlib.contextmanager
def platform(work: Path) -> Iterator[tuple[str, int]]:
    """redis, a sim pod and a gateway; yields the gateway's base URL and pid."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        redis_port = _free_port()
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        env_redis = ["--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--pool", "bench/pool"]
        pod_admin, gw_port, gw_admin = _free_port(), _free_port(), _free_port()
        with open(work / "pod.log", "wb") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "liveplex.cli", "serve", "--engine", "sim",
                                           *env_redis, "--pod-name", "pod-a", "--port", str(_free_port()),
                                           "--admin-port", str(pod_admin), "--max-sessions", "200"],
                                          stdout=log, stderr=log))
        _ready(f"http://127.0.0.1:{pod_admin}/ready")
        with open(work / "gateway.log", "wb") as log:
            gateway = subprocess.Popen([sys.executable, "-m", "liveplex.cli", "gateway", *env_redis,
                                        "--port", str(gw_port), "--admin-port", str(gw_admin)],
                                       stdout=log, stderr=log)
        procs.append(gateway)
        _ready(f"http://127.0.0.1:{gw_admin}/ready")
        time.sleep(1.0)  # the gateway's view of the pool
        yield f"http://127.0.0.1:{gw_port}/v1", gateway.pid
    finally:
        for proc in reversed(procs):
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.poll() is None:
                proc.kill()


def tone(n0: int, count: int, rate: int) -> np.ndarray:
    t = (np.arange(count) + n0) / rate
    return (8000 * np.sin(2 * np.pi * HZ * t)).astype("<i2")


class Mic(MediaStreamTrack):
    """Silence until `onset` (monotonic, set when the session starts), then the tone; 20 ms at 48 kHz."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.onset: float | None = None
        self.sent_onset: float | None = None
        self._n = 0
        self._t0: float | None = None

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._t0 is None:
            self._t0 = time.monotonic()
        wait = self._t0 + self._n * 0.02 - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        now = time.monotonic()
        loud = self.onset is not None and now >= self.onset
        if loud and self.sent_onset is None:
            self.sent_onset = now
        samples = tone(self._n * 960, 960, 48_000) if loud else np.zeros(960, "<i2")
        frame = av.AudioFrame(format="s16", layout="mono", samples=960)
        frame.planes[0].update(samples.tobytes())
        frame.sample_rate = 48_000
        frame.time_base = fractions.Fraction(1, 48_000)
        frame.pts = self._n * 960
        self._n += 1
        return frame


async def webrtc_call(base_url: str, seconds: float) -> float | None:
    """One WebRTC call for `seconds`; the round trip heard (s), or None if the tone never came back."""
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    mic = Mic()
    started = asyncio.Event()
    heard: list[float] = []
    channel = pc.createDataChannel("oai-events")
    channel.on("message", lambda text: started.set() if json.loads(text)["type"] == "session.started" else None)
    pc.addTransceiver(mic, direction="sendrecv")

    async def listen(track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                if not heard and mic.sent_onset is not None and np.abs(frame.to_ndarray()).max() > LOUD:
                    heard.append(time.monotonic())

    listening: list[asyncio.Task[None]] = []
    pc.on("track", lambda track: listening.append(asyncio.get_running_loop().create_task(listen(track))))
    await pc.setLocalDescription(await pc.createOffer())
    async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as sdk:
        created = await sdk.live.create(session=MODEL, transport={"type": "webrtc", "sdp": pc.localDescription.sdp})
    await pc.setRemoteDescription(RTCSessionDescription(created.transport.sdp, "answer"))
    await asyncio.wait_for(started.wait(), 10)
    mic.onset = time.monotonic() + ONSET_S
    await asyncio.sleep(seconds)
    channel.send(json.dumps({"type": "session.close"}))
    await asyncio.sleep(0.5)
    for task in listening:
        task.cancel()
    await pc.close()
    return heard[0] - mic.sent_onset if heard and mic.sent_onset else None


async def websocket_call(base_url: str, seconds: float) -> float | None:
    """One WebSocket call for `seconds`; the round trip heard (s), or None."""
    url = base_url.replace("http", "ws", 1) + "/live/sessions"
    async with websockets.connect(url, max_queue=None) as ws:
        await ws.send(json.dumps({"type": "session.start", "session": MODEL}))
        while json.loads(await ws.recv())["type"] != "session.started":
            pass
        sent_onset: list[float] = []
        heard: list[float] = []

        async def listen() -> None:
            async for text in ws:
                event = json.loads(text)
                if event["type"] == "session.output_audio.delta" and sent_onset and not heard:
                    if np.abs(np.frombuffer(base64.b64decode(event["delta"]), "<i2")).max() > LOUD:
                        heard.append(time.monotonic())

        listening = asyncio.get_running_loop().create_task(listen())
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < seconds:
            due = t0 + n * 0.08
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            loud = n * 0.08 >= ONSET_S
            if loud and not sent_onset:
                sent_onset.append(time.monotonic())
            pcm = tone(n * 1920, 1920, 24_000) if loud else np.zeros(1920, "<i2")
            await ws.send(json.dumps({"type": "session.input_audio.append",
                                      "audio": base64.b64encode(pcm.tobytes()).decode()}))
            n += 1
        await ws.send(json.dumps({"type": "session.close"}))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(listening, 3)
        return heard[0] - sent_onset[0] if heard and sent_onset else None


async def phase(kind: str, base_url: str, gateway: Target, calls: int, seconds: float) -> dict[str, object]:
    call = webrtc_call if kind == "webrtc" else websocket_call
    tasks = [asyncio.get_running_loop().create_task(call(base_url, seconds)) for _ in range(calls)]
    await asyncio.sleep(3.0)  # every call set up
    cpu0, t0 = gateway.cpu_s(), time.monotonic()
    await asyncio.sleep(max(1.0, seconds - 4.0))
    cpu1, t1 = gateway.cpu_s(), time.monotonic()
    trips = [t for t in await asyncio.gather(*tasks) if t is not None]
    cpu = (cpu1 - cpu0) / (t1 - t0) if cpu0 is not None and cpu1 is not None else None
    return {
        "calls": calls, "heard_back": len(trips),
        "gateway_cpu_share": None if cpu is None else round(cpu, 4),
        "gateway_cpu_ms_per_call_s": None if cpu is None else round(cpu / calls * 1000, 2),
        "round_trip_ms": {"median": round(statistics.median(trips) * 1000) if trips else None,
                          "max": round(max(trips) * 1000) if trips else None},
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4, help="callers per phase (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=15.0, help="each call's length (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, platform(Path(work)) as (base_url, pid):
        gateway = Target("gateway", base_url, pid)
        report = {"calls": args.calls, "seconds": args.seconds,
                  "websocket": await phase("websocket", base_url, gateway, args.calls, args.seconds),
                  "webrtc": await phase("webrtc", base_url, gateway, args.calls, args.seconds)}
    ws, rtc = report["websocket"]["gateway_cpu_ms_per_call_s"], report["webrtc"]["gateway_cpu_ms_per_call_s"]
    report["webrtc_over_websocket_cpu"] = round(rtc / ws, 2) if ws and rtc else None
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
