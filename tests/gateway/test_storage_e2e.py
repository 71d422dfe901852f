"""Stored calls end to end (issue 45): the official SDK (the default venv's openai) starts a call
with `store: true` through gateway A of two replicas, over real Redis, a sim pod and a real
S3-compatible server (moto's, in this process); its recording is downloaded through replica B with
`client.live.sessions.download_recording`, while the call runs and after it ends, and decoded: its
length, both channels, the caller's own frames in channel 0 and the sim's echo of them (the same
samples, 480 ms or more later) in channel 1. Another key and an unknown id are one 404 naming
`session_id`; the call is hung up through B (`client.live.sessions.hangup`), which relays it to A,
and ends as GPT-Live ends a hung-up call (`session.closed` `close_requested`); B forks it
(`client.live.forks.connect`) from its record in S3. Then the store goes
down: a new stored call goes on, told once (`info store_unavailable`), and the metric counts it.
A directory store that refuses writes mid-call (its folder became a file: ENOTDIR, as a volume
full or read-only refuses) is the same: the call goes on to its own end, told once.
"""

from __future__ import annotations

import asyncio
import base64
import io
import shutil
import wave
from pathlib import Path

import numpy as np
import openai
import pytest

from liveplex.gateway.storing import STORE_UNAVAILABLE
from liveplex.live import frames
from liveplex.storage import layout
from tests.gateway.test_moves import _metric
from tests.support import platform, pods, s3

pytestmark = pytest.mark.timeout(120)

KEY, OTHER = "stored-key", "other-key"
FLUSH_S = "0.3"
SPOKEN_FRAMES = 30
"""2.4 s of caller audio, a distinct noise frame every 80 ms."""


def _spoken() -> list[bytes]:
    rng = np.random.default_rng(45)
    return [(rng.standard_normal(frames.FRAME_SAMPLES) * 6000).astype("<i2").tobytes() for _ in range(SPOKEN_FRAMES)]


def _decoded(body: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A downloaded recording's two channels (a WAV reader's view of it)."""
    with wave.open(io.BytesIO(body)) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getsampwidth()) == (2, 24_000, 2)
        both = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
    return both[0::2], both[1::2]


def _frames_of(channel: np.ndarray) -> list[bytes]:
    usable = len(channel) - len(channel) % frames.FRAME_SAMPLES
    return [channel[i:i + frames.FRAME_SAMPLES].tobytes() for i in range(0, usable, frames.FRAME_SAMPLES)]


def test_a_stored_call_is_recorded_downloaded_through_another_replica_and_hung_up_from_it(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.CREDENTIALS.items():  # what the chart's Secret sets on the gateways
        monkeypatch.setenv(name, value)
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n{OTHER}\n")
    a_port, b_port = pods.free_port(), pods.free_port()
    with s3.server() as moto:
        bucket = moto.bucket()

        def replica(port: int) -> tuple[str, ...]:
            return ("--api-key-file", str(keys), "--port", str(port), "--peer-url", f"ws://127.0.0.1:{port}",
                    "--store-s3-bucket", bucket, "--store-s3-endpoint", moto.endpoint, "--store-flush-s", FLUSH_S)

        with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=replica(a_port)) as running, \
                pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *replica(b_port),
                                    log=tmp_path / "gateway-b.log", command="gateway") as (b, _):
            asyncio.run(_stored_call(running.gateway, b))
            moto.stop()  # the store goes down under the gateways
            asyncio.run(_store_down(running.gateway))
            stored = _metric(running.gateway.admin_root, "liveplex_gateway_stored_sessions_total")
            assert stored['liveplex_gateway_stored_sessions_total{result="failed"}'] == 1.0
            assert stored['liveplex_gateway_stored_sessions_total{result="complete"}'] == 1.0


async def _stored_call(a: pods.Running, b: pods.Running) -> None:
    spoken = _spoken()
    at_a = openai.AsyncOpenAI(base_url=a.base_url, api_key=KEY, max_retries=0)
    at_b = openai.AsyncOpenAI(base_url=b.base_url, api_key=KEY, max_retries=0)
    other = openai.AsyncOpenAI(base_url=b.base_url, api_key=OTHER, max_retries=0)
    deltas = 0
    async with at_a.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1", "store": True})
        started = await conn.recv()
        assert started.type == "session.started" and started.session.store is True
        session_id = started.session.id
        for index, frame in enumerate(spoken):  # in real time, as a caller speaks
            await conn.session.input_audio.append(audio=base64.b64encode(frame).decode())
            await asyncio.sleep(0.08)
            if index == SPOKEN_FRAMES // 2:
                so_far = await at_b.live.sessions.download_recording(session_id)
                caller, agent = _decoded(so_far.content)
                assert len(caller) >= 4 * frames.FRAME_SAMPLES  # written while the call runs
        for bad, client in ((session_id, other), ("sess_unknown", at_b)):
            with pytest.raises(openai.NotFoundError) as refused:
                await client.live.sessions.download_recording(bad)
            assert (refused.value.code, refused.value.param) == ("session_not_found", "session_id")
        with pytest.raises(openai.NotFoundError):  # another key cannot end the call either
            await other.live.sessions.hangup(session_id)
        await asyncio.sleep(1.0)  # the echo of the last frames comes back
        await at_b.live.sessions.hangup(session_id)  # through B, which relays it to A
        async with asyncio.timeout(10):
            async for event in conn:
                if event.type == "session.output_audio.delta":
                    deltas += 1
                elif event.type == "session.closed":
                    assert event.reason == "close_requested"
                    break
                else:
                    assert event.type != "error", event
    assert deltas >= SPOKEN_FRAMES  # counted from the hangup on; the recording holds all of them

    for _ in range(50):  # the call's last chunk is written as it ends
        caller, agent = _decoded((await at_b.live.sessions.download_recording(session_id)).content)
        if len(agent) >= (SPOKEN_FRAMES + 10) * frames.FRAME_SAMPLES:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the call's last chunk was never stored")
    heard, said = _frames_of(caller), _frames_of(agent)
    assert len(heard) == len(said) >= SPOKEN_FRAMES + 10
    where_heard = [heard.index(frame) for frame in spoken if frame in heard]
    where_echoed = [said.index(frame) for frame in spoken if frame in said]
    assert len(where_heard) == SPOKEN_FRAMES  # every frame the caller sent, in order, once
    assert where_heard == sorted(where_heard)
    assert len(where_echoed) >= SPOKEN_FRAMES - 2  # the sim's echo, sample for sample
    lags = {said.index(frame) - heard.index(frame) for frame in spoken if frame in said}
    assert min(lags) >= 6 and max(lags) - min(lags) <= 2, lags  # 480 ms and more, steady
    await _forked(at_b, other, session_id)


async def _forked(at_b: openai.AsyncOpenAI, other: openai.AsyncOpenAI, session_id: str) -> None:
    """The ended call forked through replica B (`client.live.forks.connect`), its record read from
    S3: a new session with the stored settings whose audio flows; another key is told nothing."""
    async with other.live.forks.connect(session_id=session_id) as refused:
        error = await refused.recv()
        assert error.type == "error" and (error.error.code, error.error.param) == ("session_not_found", "session_id")
    async with at_b.live.forks.connect(session_id=session_id) as fork:
        await fork.session.start(session={"store": False})
        started = await fork.recv()
        assert started.type == "session.started" and started.session.id != session_id
        assert (started.session.model, started.session.store) == ("gpt-live-1", False)
        deltas = 0
        async with asyncio.timeout(10):
            async for event in fork:
                assert event.type != "error", event
                deltas += event.type == "session.output_audio.delta"
                if deltas == 5:
                    break
        await fork.session.close()


async def _store_down(gateway: pods.Running) -> None:
    async with openai.AsyncOpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0).live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1", "store": True})
        told, deltas = [], 0
        async with asyncio.timeout(30):
            async for event in conn:
                if event.type == "info":
                    told.append(event.code)
                elif event.type == "session.output_audio.delta":
                    deltas += 1
                    if STORE_UNAVAILABLE in told and deltas > 10:
                        break
        assert told == [STORE_UNAVAILABLE]  # once, and the call went on
        await conn.session.close()


def test_a_store_that_refuses_writes_mid_call_stops_storing_it_and_the_call_goes_on(
        redis_url: str, tmp_path: Path) -> None:
    stored = tmp_path / "stored"
    flags = ("--store-dir", str(stored), "--store-flush-s", FLUSH_S)
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=flags) as running:
        asyncio.run(_refused_mid_call(running.gateway, stored))
        counted = _metric(running.gateway.admin_root, "liveplex_gateway_stored_sessions_total")
        assert counted['liveplex_gateway_stored_sessions_total{result="failed"}'] == 1.0
        assert counted.get('liveplex_gateway_stored_sessions_total{result="complete"}', 0.0) == 0.0


async def _refused_mid_call(gateway: pods.Running, stored: Path) -> None:
    """Once the call's first chunk is written its audio folder becomes a file, so the writer's next
    put fails (ENOTDIR); the call runs 2 s more and ends by the caller's close."""
    async with openai.AsyncOpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0).live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1", "store": True})
        started = await conn.recv()
        assert started.type == "session.started" and started.session.store is True
        audio = stored / layout.audio_prefix(started.session.id)
        told, deltas, refused_at = [], 0, None
        async with asyncio.timeout(30):
            async for event in conn:
                assert event.type != "error", event
                if event.type == "info":
                    told.append(event.code)
                elif event.type == "session.output_audio.delta":
                    deltas += 1
                    if refused_at is None and audio.is_dir() and any(audio.iterdir()):
                        shutil.rmtree(audio)
                        audio.write_bytes(b"")
                        refused_at = deltas
                    elif refused_at is not None and told and deltas > refused_at + 25:
                        break
            await conn.session.close()
            async for event in conn:
                assert event.type not in ("info", "error"), event
                if event.type == "session.closed":
                    assert event.reason == "close_requested"
                    break
        assert told == [STORE_UNAVAILABLE]  # once, and the call went on to its end
