"""WebRTC calls against WebSocket calls through one gateway, side by side (docs/webrtc.md, docs/bench.md).

A throwaway redis-server, one sim pod and a gateway, all on loopback. Phases of callers for
`--seconds` each, one transport at a time: `--calls` WebSocket callers, then `--calls` WebRTC
callers, then WebRTC callers at each count of `--ramp` (the load test). Every caller says a
440 Hz tone in real time, each packet sent once its audio would have been captured (WebSocket:
80 ms `session.input_audio.append` chunks of 24 kHz PCM; WebRTC: an aiortc peer, Opus at
48 kHz in 20 ms packets, receiving with no fixed prefetch, as a browser would: `bench.receive`). Per phase: the
gateway's CPU seconds per second of call (its process CPU clock over the steady window), this
process's (the callers': aiortc is Python, and starved callers make a phase unclean), the round
trip each caller hears (from the capture of the tone's first sample to the first loud audio
heard back: the sim's 480 ms echo, the pod's jitter buffer, the transport both ways) and the
longest silence between two packets a caller heard after its first. Each caller's onset is put
off by a random part of a tick (`TICK_S`). A phase is clean when every
caller heard its echo and no caller's longest silence passed `CLEAN_GAP_S`. Compare phases of
one run, not runs on different machines. JSON on stdout.

    .venv/bin/python scripts/bench_webrtc.py [--calls 4] [--seconds 15] [--ramp 2,4,8] [--gateway-cpus 0]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import openai
import websockets
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from liveplex.bench.receive import tune_receiver
from liveplex.bench.target import Target
from liveplex.bench.tone import ToneTrack, sine

HZ = 440.0
ONSET_S = 1.0
"""Each caller is silent this long after its session started, then says the tone."""
LOUD = 2000
"""Heard audio louder than this (peak) is the echo of the tone."""
MODEL = {"model": "gpt-live-1"}
CLEAN_GAP_S = 0.2
"""A caller that heard nothing for longer than this (after its first packet) heard a dropout."""
CHUNK_S = 0.08
TICK_S = 0.08
"""Each caller's onset is put off by a random part of a tick: callers that all spoke at once would
all wait the same time for the pod's next tick, and a phase's median would be one draw of it."""


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
def platform(work: Path, gateway_cpus: set[int] | None = None) -> Iterator[tuple[str, int]]:
    """redis, a sim pod and a gateway (on `gateway_cpus` alone when given, and the rest off
    them); yields the gateway's base URL and pid."""
    procs: list[subprocess.Popen[bytes]] = []
    on_gateway_cpus: list[str] = []
    off_gateway_cpus: list[str] = []
    if gateway_cpus:  # every thread of a process started under taskset, the callers' from here on
        others = os.sched_getaffinity(0) - gateway_cpus
        on_gateway_cpus = ["taskset", "-c", ",".join(map(str, sorted(gateway_cpus)))]
        off_gateway_cpus = ["taskset", "-c", ",".join(map(str, sorted(others)))]
        os.sched_setaffinity(0, others)
    try:
        redis_port = _free_port()
        procs.append(subprocess.Popen([*off_gateway_cpus, "redis-server", "--port", str(redis_port), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        env_redis = ["--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--pool", "bench/pool"]
        pod_admin, gw_port, gw_admin = _free_port(), _free_port(), _free_port()
        with open(work / "pod.log", "wb") as log:
            procs.append(subprocess.Popen([*off_gateway_cpus, sys.executable, "-m", "liveplex.cli", "serve",
                                           "--engine", "sim", *env_redis, "--pod-name", "pod-a",
                                           "--port", str(_free_port()), "--admin-port", str(pod_admin),
                                           "--max-sessions", "200"],
                                          stdout=log, stderr=log))
        _ready(f"http://127.0.0.1:{pod_admin}/ready")
        with open(work / "gateway.log", "wb") as log:
            gateway = subprocess.Popen([*on_gateway_cpus, sys.executable, "-m", "liveplex.cli", "gateway", *env_redis,
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


@dataclass
class Heard:
    """What one caller measured."""

    round_trip_s: float | None = None
    longest_gap_s: float = 0.0
    _last: float | None = None

    def packet(self, at: float) -> None:
        if self._last is not None:
            self.longest_gap_s = max(self.longest_gap_s, at - self._last)
        self._last = at


async def webrtc_call(base_url: str, seconds: float) -> Heard:
    """One WebRTC call for `seconds`."""
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    mic = ToneTrack(HZ, onset=None)
    started = asyncio.Event()
    heard = Heard()
    channel = pc.createDataChannel("oai-events")
    channel.on("message", lambda text: started.set() if json.loads(text)["type"] == "session.started" else None)
    pc.addTransceiver(mic, direction="sendrecv")

    async def listen(track: MediaStreamTrack) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                now = time.monotonic()
                heard.packet(now)
                if (heard.round_trip_s is None and mic.spoke_at is not None and isinstance(frame, av.AudioFrame)
                        and np.abs(frame.to_ndarray()).max() > LOUD):
                    heard.round_trip_s = now - mic.spoke_at

    listening: list[asyncio.Task[None]] = []
    pc.on("track", lambda track: listening.append(asyncio.get_running_loop().create_task(listen(track))))
    await pc.setLocalDescription(await pc.createOffer())
    async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as sdk:
        created = await sdk.live.create(session={"model": MODEL["model"]},
                                        transport={"type": "webrtc", "sdp": pc.localDescription.sdp})
    await pc.setRemoteDescription(RTCSessionDescription(created.transport.sdp, "answer"))
    tune_receiver(pc)
    await asyncio.wait_for(started.wait(), 10)
    mic.onset = time.monotonic() + ONSET_S + random.uniform(0, TICK_S)
    await asyncio.sleep(seconds)
    channel.send(json.dumps({"type": "session.close"}))
    await asyncio.sleep(0.5)
    for task in listening:
        task.cancel()
    await pc.close()
    return heard


async def websocket_call(base_url: str, seconds: float) -> Heard:
    """One WebSocket call for `seconds`: each 80 ms chunk sent once captured."""
    url = base_url.replace("http", "ws", 1) + "/live/sessions"
    heard = Heard()
    async with websockets.connect(url, max_queue=None) as ws:
        await ws.send(json.dumps({"type": "session.start", "session": MODEL}))
        while json.loads(await ws.recv())["type"] != "session.started":
            pass
        spoke_at: list[float] = []

        async def listen() -> None:
            async for text in ws:
                event = json.loads(text)
                if event["type"] == "session.output_audio.delta":
                    now = time.monotonic()
                    heard.packet(now)
                    if spoke_at and heard.round_trip_s is None and np.abs(
                            np.frombuffer(base64.b64decode(event["delta"]), "<i2")).max() > LOUD:
                        heard.round_trip_s = now - spoke_at[0]

        listening = asyncio.get_running_loop().create_task(listen())
        t0 = time.monotonic() + random.uniform(0, TICK_S)
        n = 0
        while time.monotonic() - t0 < seconds:
            start = t0 + n * CHUNK_S
            await asyncio.sleep(max(0.0, start + CHUNK_S - time.monotonic()))  # its audio captured
            loud = n * CHUNK_S >= ONSET_S
            if loud and not spoke_at:
                spoke_at.append(start)
            pcm = sine(HZ, n * 1920, 1920, 24_000) if loud else np.zeros(1920, "<i2")
            await ws.send(json.dumps({"type": "session.input_audio.append",
                                      "audio": base64.b64encode(pcm.tobytes()).decode()}))
            n += 1
        await ws.send(json.dumps({"type": "session.close"}))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(listening, 3)
    return heard


async def phase(kind: str, base_url: str, gateway: Target, calls: int, seconds: float) -> dict[str, Any]:
    call = webrtc_call if kind == "webrtc" else websocket_call
    tasks = [asyncio.get_running_loop().create_task(call(base_url, seconds)) for _ in range(calls)]
    await asyncio.sleep(3.0)  # every call set up
    cpu0, own0, t0 = gateway.cpu_s(), time.process_time(), time.monotonic()
    await asyncio.sleep(max(1.0, seconds - 4.0))
    cpu1, own1, t1 = gateway.cpu_s(), time.process_time(), time.monotonic()
    results = await asyncio.gather(*tasks)
    trips = [r.round_trip_s for r in results if r.round_trip_s is not None]
    gap = max(r.longest_gap_s for r in results)
    cpu = (cpu1 - cpu0) / (t1 - t0) if cpu0 is not None and cpu1 is not None else None
    return {
        "transport": kind, "calls": calls, "heard_back": len(trips),
        "clean": len(trips) == calls and gap <= CLEAN_GAP_S,
        "longest_gap_ms": round(gap * 1000),
        "gateway_cpu_share": None if cpu is None else round(cpu, 4),
        "gateway_cpu_ms_per_call_s": None if cpu is None else round(cpu / calls * 1000, 2),
        "callers_cpu_share": round((own1 - own0) / (t1 - t0), 4),
        "round_trip_ms": {"median": round(statistics.median(trips) * 1000) if trips else None,
                          "max": round(max(trips) * 1000) if trips else None},
    }


def _cpus(text: str) -> set[int]:
    cpus = {int(part) for part in text.split(",") if part.strip().isdigit()}
    if not cpus or not cpus < os.sched_getaffinity(0):
        raise argparse.ArgumentTypeError(
            f"--gateway-cpus must be some (not all) of this process's CPUs {sorted(os.sched_getaffinity(0))}, "
            f"got {text!r}")
    return cpus


def _counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part]
    if not counts or min(counts) <= 0:
        raise argparse.ArgumentTypeError(f"--ramp must be positive counts separated by commas, got {text!r}")
    return counts


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4, help="callers per side-by-side phase (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=15.0, help="each call's length (default: %(default)s)")
    parser.add_argument("--ramp", type=_counts, default=[], metavar="N,N,...",
                        help="WebRTC call counts of the load test (default: none)")
    parser.add_argument("--gateway-cpus", type=_cpus, default=None, metavar="N,N,...",
                        help="pin the gateway to these CPUs and everything else (pod, redis, callers) to the "
                             "others (default: no pinning)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work, platform(Path(work), args.gateway_cpus) as (base_url, pid):
        gateway = Target("gateway", base_url, pid)
        report: dict[str, Any] = {
            "calls": args.calls, "seconds": args.seconds,
            "gateway_cpus": sorted(args.gateway_cpus) if args.gateway_cpus else None,
            "websocket": await phase("websocket", base_url, gateway, args.calls, args.seconds),
            "webrtc": await phase("webrtc", base_url, gateway, args.calls, args.seconds)}
        ramp = [await phase("webrtc", base_url, gateway, n, args.seconds) for n in args.ramp]
    ws = report["websocket"]["gateway_cpu_ms_per_call_s"]
    rtc = report["webrtc"]["gateway_cpu_ms_per_call_s"]
    report["webrtc_over_websocket_cpu"] = round(rtc / ws, 2) if ws and rtc else None
    if ramp:
        clean = [step for step in ramp if step["clean"]]
        top = max(clean, key=lambda step: step["calls"], default=None)
        per_call = top["gateway_cpu_ms_per_call_s"] if top is not None else None
        report["ramp"] = ramp
        report["webrtc_calls_per_gateway_core"] = (
            {"largest_clean_step": top["calls"], "estimate": int(1000 // per_call)}
            if top is not None and per_call else None)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
