"""Checks 22-30: audio, timeline, transcript, usage and mute (gpt-live §6)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable

from liveplex.conformance import signals
from liveplex.conformance.checklist import Check, expect
from liveplex.conformance.context import Context
from liveplex.conformance.wire import Json, Received, Wire, brief

STREAM_MS = 3000
"""gpt-live §14.22: 3 s of real-time audio."""

MAX_LATENESS_S = 1.0
USAGE_PERIOD_S = 5.0
USAGE_SLACK_S = 0.5


def _deltas_bytes(deltas: list[Received]) -> set[int]:
    return {len(base64.b64decode(str(d.event["delta"]))) for d in deltas}


def _replies(w: Wire, since: int = 0) -> list[dict[str, object]]:
    """Events in the log from index `since` that answer commands (not audio/transcript/usage)."""
    quiet = {"session.output_audio.delta", "session.output_transcript.delta", "session.usage.updated"}
    return [r.event for r in w.log[since:] if r.event.get("type") not in quiet]


async def realtime_stream(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.start()
        first = len(w.log)
        await w.play(signals.speech(STREAM_MS))
        during = len(w.deltas)
        replies = _replies(w, first)
        expect(not replies, f"appends were answered: {brief(replies[0])}" if replies else "")
        await w.close_session()
    sizes = _deltas_bytes(w.deltas)
    expect(sizes == {3840}, f"delta sizes {sorted(sizes)}, expected 3840")
    want = 0.7 * STREAM_MS / signals.FRAME_MS
    expect(during >= want, f"{during} deltas during {STREAM_MS} ms of streaming, expected ≥ {want:g}")
    t0 = w.deltas[0].at
    lateness = max(d.at - (t0 + i * signals.FRAME_MS / 1000) for i, d in enumerate(w.deltas))
    expect(lateness < MAX_LATENESS_S, f"timeline lateness {lateness * 1000:.0f} ms ≥ 1000 ms")
    return f"{during} deltas while streaming, max lateness {lateness * 1000:.0f} ms"


async def chunk_sizes(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.start()
        for chunk_ms, total_ms in ((10, 500), (100, 500), (250, 500), (1000, 1000)):
            await w.play(signals.speech(total_ms), chunk_ms=chunk_ms)
        await w.send({"type": "session.input_audio.mute", "event_id": "after"})
        await w.expect("session.input_audio.muted", client_event_id="after")
        await w.close_session()
    return "10, 100, 250 and 1000 ms chunks accepted without a reply"


async def bad_audio(ctx: Context) -> str:
    over_cap = bytes(30 * 1000 * signals.BYTES_PER_MS + 2)
    cases = {
        "bad-b64": "!!!not base64!!!",
        "odd": signals.b64(b"\x00\x01\x02"),
        "empty": "",
        "over-cap": signals.b64(over_cap),
    }
    async with await ctx.wire() as w:
        await w.start()
        for event_id, audio in cases.items():
            await w.send({"type": "session.input_audio.append", "event_id": event_id, "audio": audio})
            await w.expect_error("invalid_value", "audio", client_event_id=event_id)
        before = len(w.deltas)
        usage = await _next_usage(w, USAGE_PERIOD_S + ctx.options.timeout_s)
        expect(len(w.deltas) > before, "no audio deltas after the bad chunks")
        seconds = usage["usage"]["seconds"]
        expect(seconds > 0, f"usage.seconds {seconds} did not grow")
        await w.close_session()
    return f"4 bad chunks refused; deltas kept flowing and usage reached {seconds} s"


async def _next_usage(w: Wire, timeout_s: float) -> Json:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        event = (await w.recv(max(0.0, deadline - loop.time()))).event
        if event.get("type") == "session.usage.updated":
            return event
        expect(event.get("type") in ("session.output_audio.delta", "session.output_transcript.delta"),
               f"unexpected event while waiting for usage: {brief(event)}")


async def usage_matches_deltas(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.start()
        await w.play(signals.speech(1500))
        closed = await w.close_session()
    seconds = float(closed["usage"]["seconds"])
    expect(len(w.deltas) == round(seconds / 0.08),
           f"{len(w.deltas)} audio deltas but usage.seconds {seconds} = {round(seconds / 0.08)} frames")
    return f"{len(w.deltas)} deltas = {seconds} s"


def transcript_problems(w: Wire) -> list[str]:
    """gpt-live §14.26's rules on every transcript delta of a socket, checked against its audio."""
    problems = []
    last_start = -1
    deltas_before = 0
    for r in w.log:
        event = r.event
        if event.get("type") == "session.output_audio.delta":
            deltas_before += 1
            continue
        if event.get("type") != "session.output_transcript.delta":
            continue
        start, end = event.get("start_ms"), event.get("end_ms")
        if not event.get("delta"):
            problems.append(f"empty delta: {brief(event)}")
        if not (isinstance(start, int) and isinstance(end, int) and end - start == 80 and start % 80 == 0):
            problems.append(f"start_ms/end_ms not one 80 ms frame: {brief(event)}")
            continue
        if start < last_start:
            problems.append(f"start_ms decreased to {start}: {brief(event)}")
        if start > 80 * (deltas_before - 1):
            problems.append(f"start_ms {start} is after the {deltas_before} audio deltas received: {brief(event)}")
        last_start = start
    return problems


def transcript(w: Wire) -> str:
    return "".join(str(r.event["delta"]) for r in w.log if r.event.get("type") == "session.output_transcript.delta")


async def transcripts(ctx: Context) -> str:
    async def session(pcm: bytes) -> Wire:
        async with await ctx.wire() as w:
            await w.start()
            await w.play(pcm)
            await w.close_session()
        return w

    loud, quiet = await asyncio.gather(session(signals.speech(STREAM_MS)), session(signals.silence(STREAM_MS)))
    problems = transcript_problems(loud) + transcript_problems(quiet)
    expect(not problems, "; ".join(problems[:3]))
    if not ctx.server.is_sim:
        return f"transcript rules hold ({len(transcript(loud))} chars); sim-only echo parts skipped"
    said = transcript(loud)
    expect(said.startswith("I hear you"), f"loud input: transcript {said!r} should start with 'I hear you'")
    expect(transcript(quiet) == "", f"silent input: transcript {transcript(quiet)!r} should be empty")
    return f"loud: {said!r}; silent: none"


async def usage_cadence(ctx: Context) -> str:
    async with await ctx.wire() as w:
        started = await w.start()
        t0 = w.arrival(started)  # not the log's last entry: the reader may have logged deltas since
        usages: list[Received] = []
        while len(usages) < 2:
            received = await w.recv(USAGE_PERIOD_S + USAGE_SLACK_S + 1)
            if received.event.get("type") == "session.usage.updated":
                usages.append(received)
                window = received.event.get("context_window", {"usage_ratio": 0})
                expect(set(received.event) - {"context_window"} == {"type", "event_id", "usage"}
                       and set(received.event["usage"]) == {"seconds"}
                       and isinstance(window, dict) and 0 <= window.get("usage_ratio", -1) <= 1,
                       "usage event must be exactly {type, event_id, usage: {seconds}} and maybe "
                       f"context_window: {{usage_ratio in [0, 1]}}: {brief(received.event)}")
                before = w.log[:w.log.index(received)]
                frames = sum(1 for r in before if r.event.get("type") == "session.output_audio.delta")
                seconds = received.event["usage"]["seconds"]
                expect(isinstance(seconds, (int, float)) and seconds >= 0
                       and abs(seconds / 0.08 - round(seconds / 0.08)) < 1e-6,
                       f"usage.seconds {seconds} is not a multiple of 0.08")
                expect(round(seconds / 0.08) == frames,
                       f"usage.seconds {seconds} but {frames} audio deltas were sent before it")
        closing_at = len(w.log)
        await w.close_session()
    offsets = [u.at - t0 for u in usages]
    for i, offset in enumerate(offsets, 1):
        expect(abs(offset - i * USAGE_PERIOD_S) <= USAGE_SLACK_S,
               f"usage {i} came {offset:.2f} s after session.started, expected {i * USAGE_PERIOD_S:g} ± 0.5 s")
    values = [float(u.event["usage"]["seconds"]) for u in usages]
    expect(values == sorted(values), f"usage decreased: {values}")
    late = [r.event for r in w.log[closing_at:] if r.event.get("type") == "session.usage.updated"]
    expect(not late, f"usage after session.close: {brief(late[0])}" if late else "")
    return f"usage at {', '.join(f'{o:.2f}' for o in offsets)} s: {values}"


async def mute(ctx: Context) -> str:
    echo = ctx.server.int_setting("echo_frames", 6)
    jitter = ctx.server.int_setting("jitter_frames", 4)
    bound = echo + jitter + 1
    async with await ctx.wire() as w:
        await w.start()
        if not ctx.server.is_sim:
            await w.send({"type": "session.input_audio.mute", "event_id": "m1"})
            await w.expect("session.input_audio.muted", client_event_id="m1")
            await w.send({"type": "session.input_audio.unmute", "event_id": "u1"})
            await w.expect("session.input_audio.unmuted", client_event_id="u1")
            await w.close_session()
            return "acks m1/u1; sim-only echo parts skipped"
        speaker = asyncio.create_task(w.play(signals.speech(6000)))
        try:
            await _until(w, lambda: any(not signals.is_zero(str(d.event["delta"])) for d in w.deltas), 2.5)
            await w.send({"type": "session.input_audio.mute", "event_id": "m1"})
            await w.expect("session.input_audio.muted", client_event_id="m1")
            muted_at = len(w.deltas)
            words_at = len(w.log)
            await _until(w, lambda: len(w.deltas) >= muted_at + bound + 12, 3.0)
            loud = [i for i in range(muted_at + bound, len(w.deltas))
                    if not signals.is_zero(str(w.deltas[i].event["delta"]))]
            expect(not loud, f"echo not silent {bound} frames after the mute ack: "
                             f"frame {loud[0] - muted_at} after it is loud" if loud else "")
            cutoff = w.deltas[muted_at + bound].at
            words = [r.event for r in w.log[words_at:]
                     if r.event.get("type") == "session.output_transcript.delta" and r.at > cutoff]
            expect(not words, f"words while muted: {brief(words[0])}" if words else "")
            await w.send({"type": "session.input_audio.unmute", "event_id": "u1"})
            await w.expect("session.input_audio.unmuted", client_event_id="u1")
            unmuted_at = len(w.deltas)
            await _until(w, lambda: any(not signals.is_zero(str(d.event["delta"]))
                                        for d in w.deltas[unmuted_at:]), 2.0)
        finally:
            speaker.cancel()
        await w.close_session()
    return f"echo silent within {bound} frames of the ack, back after unmute"


async def _until(w: Wire, condition: Callable[[], object], seconds: float) -> None:
    """Receive until `condition()` holds, failing after `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        remaining = deadline - loop.time()
        expect(remaining > 0, f"condition not reached within {seconds:g} s")
        event = (await w.recv(remaining)).event
        expect(event.get("type") in ("session.output_audio.delta", "session.output_transcript.delta",
                                     "session.usage.updated"), f"unexpected {brief(event)}")


async def mute_acks(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.send({"type": "session.input_audio.mute", "event_id": "early"})
        await w.expect_error("session_not_started", "type", client_event_id="early")
        await w.start()
        for type_, event_id in (("mute", "m1"), ("mute", "m2"), ("unmute", "u1"), ("unmute", "u2")):
            await w.send({"type": f"session.input_audio.{type_}", "event_id": event_id})
            await w.expect(f"session.input_audio.{type_}d", client_event_id=event_id)
        await w.send({"type": "session.input_audio.mute"})
        ack = await w.expect("session.input_audio.muted")
        expect("client_event_id" not in ack, f"an ack without event_id should carry no client_event_id: {brief(ack)}")
        await w.close_session()
    return "four acks; no client_event_id without event_id; mute before start refused"


CHECKS = (
    Check(22, "realtime-stream", realtime_stream, seconds=4.0),
    Check(23, "chunk-sizes", chunk_sizes, seconds=3.5),
    Check(24, "bad-audio", bad_audio, seconds=6.0),
    Check(25, "usage-equals-deltas", usage_matches_deltas, seconds=2.5),
    Check(26, "transcript", transcripts, seconds=4.0),
    Check(28, "usage-cadence", usage_cadence, seconds=11.0),
    Check(29, "mute-echo", mute, seconds=6.0),
    Check(30, "mute-acks", mute_acks),
)
