"""Stored calls, the longer cases (`slow`; docs/storage.md): a WebRTC call stored through
gateway A is hung up through replica B (`client.live.sessions.hangup`, relayed to A) and its
recording, downloaded through B, holds the caller's tone and the sim's echo of it; and the bound on
what a lost gateway loses: gateway A is SIGKILLed mid-call, and the recording B serves afterwards
holds every frame the caller had heard up to `--store-flush-s` (plus two writes) before the kill.
Real parts: Redis, a sim pod, two gateway replicas, a directory store they share."""

from __future__ import annotations

import asyncio
import io
import signal
import time
import wave
from pathlib import Path

import numpy as np
import openai
import pytest

from liveplex.live import frames
from tests.support import clients, platform, pods, webrtc

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

FLUSH_S = 0.5


def _channels(body: bytes) -> tuple[np.ndarray, np.ndarray]:
    with wave.open(io.BytesIO(body)) as wav:
        assert (wav.getnchannels(), wav.getframerate()) == (2, 24_000)
        both = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
    return both[0::2], both[1::2]


def _tone_share(channel: np.ndarray, hz: float) -> float:
    """How much of `channel`'s energy is at `hz` (the caller's tone), 0..1."""
    spectrum = np.abs(np.fft.rfft(channel.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(channel), 1 / 24_000)
    near = (freqs > hz - 20) & (freqs < hz + 20)
    return float(spectrum[near].sum() / max(spectrum.sum(), 1.0))


def _replicas(redis_url: str, tmp_path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    a_port, b_port = pods.free_port(), pods.free_port()
    common = ("--store-dir", str(tmp_path / "stored"), "--store-flush-s", str(FLUSH_S))
    return ((*common, "--port", str(a_port), "--peer-url", f"ws://127.0.0.1:{a_port}"),
            (*common, "--port", str(b_port), "--peer-url", f"ws://127.0.0.1:{b_port}"))


def test_a_stored_webrtc_call_is_hung_up_through_another_replica_and_its_recording_holds_the_call(
        redis_url: str, tmp_path: Path) -> None:
    a_flags, b_flags = _replicas(redis_url, tmp_path)
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=a_flags) as p, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *b_flags,
                                log=tmp_path / "gateway-b.log", command="gateway") as (b, _):
        async def scenario() -> bytes:
            caller = webrtc.Caller(hz=440)
            async with openai.AsyncOpenAI(base_url=p.gateway.base_url, api_key="k", max_retries=0) as at_a, \
                    openai.AsyncOpenAI(base_url=b.base_url, api_key="k", max_retries=0) as at_b:
                created = await at_a.live.create(session={"model": "gpt-live-1", "store": True},
                                                 transport={"type": "webrtc", "sdp": await caller.offer()})
                await caller.accept(created.transport.sdp)
                started, _ = await caller.until("session.started")
                assert started["session"]["store"] is True
                await asyncio.sleep(2.5)  # the tone, and its echo
                await at_b.live.sessions.hangup(created.session.id)
                closed, _ = await caller.until("session.closed")
                assert closed["reason"] == "close_requested"
                await caller.close()
                await asyncio.sleep(FLUSH_S)
                return (await at_b.live.sessions.download_recording(created.session.id)).content

        heard, said = _channels(asyncio.run(scenario()))
        assert len(heard) >= 2.0 * 24_000
        assert _tone_share(heard, 440) > 0.5  # the caller's microphone, as the engine heard it
        assert _tone_share(said, 440) > 0.5  # the sim's echo of it, as the caller heard it


def test_a_killed_gateway_loses_at_most_the_flush_period_of_the_recording(redis_url: str, tmp_path: Path) -> None:
    a_flags, b_flags = _replicas(redis_url, tmp_path)
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=a_flags) as p, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *b_flags,
                                log=tmp_path / "gateway-b.log", command="gateway") as (b, _):
        async def scenario() -> tuple[int, bytes]:
            ws, started = await clients.started(p.gateway.ws_url, start={
                **clients.START, "session": {"model": "gpt-live-1", "store": True}})
            _, deltas = await clients.events_while_speaking(ws, 3.0)
            p.gateway_process.send_signal(signal.SIGKILL)  # the gateway dies under the call
            killed = time.monotonic()
            await asyncio.sleep(1.0)
            async with openai.AsyncOpenAI(base_url=b.base_url, api_key="k", max_retries=0) as at_b:
                body = (await at_b.live.sessions.download_recording(started["session"]["id"])).content
            assert time.monotonic() - killed < 5
            return deltas, body

        heard_frames, body = asyncio.run(scenario())
        _, said = _channels(body)
        stored_frames = len(said) // frames.FRAME_SAMPLES
        lost = heard_frames - stored_frames
        print(f"heard {heard_frames} frames before the kill, {stored_frames} stored: {lost} lost")
        assert heard_frames > 30 and lost <= (FLUSH_S + 0.2) / 0.08, (heard_frames, stored_frames)
