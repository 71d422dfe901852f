"""The idle pause on a sim pod over a real socket (issue 43, docs/pause.md): a caller silent for
`--idle-pause-s` is paused (`session.paused`, no more audio), its speech wakes it
(`session.resumed`, the echo of the pre-roll comes back), and its usage splits into active and
paused seconds that add up."""

from __future__ import annotations

import asyncio
import base64

import orjson
import websockets

from liveplex.bench import audio
from liveplex.live import frames
from tests.support import clients, pods

SILENCE = bytes(frames.FRAME_BYTES)


def speech() -> list[bytes]:
    pcm = audio.read_wav(audio.recording_path(), frames.SAMPLE_RATE).astype("<i2").tobytes()
    return [pcm[i:i + frames.FRAME_BYTES] for i in range(frames.FRAME_BYTES, 40 * frames.FRAME_BYTES,
                                                          frames.FRAME_BYTES)]


def append(pcm: bytes) -> str:
    return orjson.dumps({"type": "session.input_audio.append", "audio": base64.b64encode(pcm).decode()}).decode()


async def stream(ws: websockets.ClientConnection, script: list[bytes]) -> None:
    """The caller's audio in real time, one frame every 80 ms."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for i, pcm in enumerate(script):
        await ws.send(append(pcm))
        await asyncio.sleep(max(0.0, t0 + (i + 1) * frames.FRAME_MS / 1000 - loop.time()))


async def test_a_silent_caller_pauses_and_its_speech_wakes_it() -> None:
    quiet_s = 2.8  # the 1 s timeout (13 frames), then more than a second paused
    script = [SILENCE] * round(quiet_s * 1000 / frames.FRAME_MS) + speech()
    async with pods.in_process("--idle-pause-s", "1") as pod:
        assert pod.built is not None
        stats = pod.built.pod.backend.pause_stats
        ws, _ = await clients.started(pod.ws_url)
        async with ws:
            sender = asyncio.create_task(stream(ws, script))
            seen: list[dict] = []
            async with asyncio.timeout(15):
                while not sender.done() or not any(e["type"] == "session.resumed" for e in seen):
                    seen.append(orjson.loads(await ws.recv()))
                await sender
                # what the model heard after the wake comes back as the echo: loud audio
                loud_after = 0
                while loud_after < 3:
                    event = orjson.loads(await ws.recv())
                    seen.append(event)
                    if event["type"] == "session.output_audio.delta" and any(base64.b64decode(event["delta"])):
                        loud_after += 1
                await ws.send(orjson.dumps({"type": "session.close"}).decode())
                closed, rest = await clients.until(ws, "session.closed")
            seen += [*rest, closed]
        kinds = [e["type"] for e in seen]
        paused, resumed = kinds.index("session.paused"), kinds.index("session.resumed")
        assert paused < resumed and kinds.count("session.paused") == 1
        between = kinds[paused + 1:resumed]
        assert "session.output_audio.delta" not in between, "a paused session was stepped"
        assert stats.pauses == 1 and stats.wakes == 1 and stats.refused_wakes == 0 and stats.paused == 0
        usage = closed["usage"]
        assert usage["seconds"] == usage["active_seconds"] + usage["paused_seconds"]
        assert 1 <= usage["paused_seconds"] <= 2 and isinstance(usage["paused_seconds"], int)
        assert stats.wake.counts[-1] == 0 and sum(stats.wake.counts) == 1 and stats.wake.total < 0.2


async def test_a_session_that_hangs_up_while_paused_ends_with_its_paused_time() -> None:
    async with pods.in_process("--idle-pause-s", "1") as pod:
        assert pod.built is not None
        ws, _ = await clients.started(pod.ws_url)
        async with ws:
            sender = asyncio.create_task(stream(ws, [SILENCE] * 40))  # 3.2 s: paused after ~1.1 s
            async with asyncio.timeout(10):
                await clients.until(ws, "session.paused")
                await sender
                await ws.send(orjson.dumps({"type": "session.close"}).decode())
                closed, _ = await clients.until(ws, "session.closed")
        assert closed["reason"] == "close_requested"
        assert closed["usage"]["paused_seconds"] >= 1
        assert closed["usage"]["seconds"] >= 3
        assert pod.built.pod.backend.pause_stats.paused == 0


def test_the_pod_refuses_a_bad_threshold() -> None:
    from liveplex import serve

    args = serve.build_parser().parse_args(["--idle-pause-s", "3", "--vad-threshold", "1.5"])
    try:
        serve.build_pod(args)
    except ValueError as exc:
        assert "--vad-threshold" in str(exc)
    else:
        raise AssertionError("a threshold above 1 was taken")


async def test_a_pause_past_the_host_budget_keeps_its_session_in_the_batch() -> None:
    """Two callers silent past the timeout on a pod whose host budget is one byte: the first pause
    teaches the pod a park's size (the sim's: a few kB), and the other session, whose park would
    pass the budget, stays in the batch (no `session.paused`, its audio goes on)."""
    async with pods.in_process("--idle-pause-s", "1", "--pause-host-budget-bytes", "1") as pod:
        assert pod.built is not None
        backend = pod.built.pod.backend
        (a, _), (b, _) = [await clients.started(pod.ws_url) for _ in range(2)]
        async with a, b:
            senders = [asyncio.create_task(stream(ws, [SILENCE] * 30)) for ws in (a, b)]  # 2.4 s
            seen: dict[str, list[str]] = {"a": [], "b": []}

            async def read(name: str, ws: websockets.ClientConnection) -> None:
                while True:
                    seen[name].append(orjson.loads(await ws.recv())["type"])

            readers = [asyncio.create_task(read(n, ws)) for n, ws in (("a", a), ("b", b))]
            async with asyncio.timeout(10):
                await asyncio.gather(*senders)
            for task in readers:
                task.cancel()
            stats = backend.pause_stats
            assert stats.pauses == 1 and stats.paused == 1 and 0 < stats.park_bytes == stats.parked_bytes
            # no more parks fit: the slots bound all sessions, the paused one's kept for its wake
            assert backend.free_slots() == pod.built.pod.served.info.max_sessions - 2
        paused, stayed = sorted(seen.values(), key=lambda kinds: "session.paused" not in kinds)
        assert "session.paused" not in stayed
        assert stayed[-20:].count("session.output_audio.delta") >= 10, "the session over budget kept running"
