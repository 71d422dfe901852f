"""One bench session: a GPT-Live caller streaming audio at real time over a raw WebSocket.

The shell around `Timeline`: it connects, sends `session.start`, writes chunk `k` at
`started + k · chunk` (absolute deadlines, so it never drifts), reads every server event with an
arrival timestamp from `time.perf_counter_ns`, and sends `session.close` after the last chunk
(live-contract §13.2). It uses `websockets` and orjson directly, never the SDK, so that hundreds of
sessions fit in one client process.
"""

from __future__ import annotations

import array
import asyncio
import base64
import dataclasses
import time

import numpy as np
import orjson
from websockets import exceptions as ws_exceptions
from websockets.asyncio import client as ws_client

from liveplex import percentiles
from liveplex.bench import jitter, roundtrip, talk
from liveplex.bench import timeline as timeline_mod
from liveplex.gptlive import events

"""Incoming message cap; the SDK allows 2 MiB, servers send at most one 80 ms frame."""

TIMEOUT_SLACK_S = 60.0
"""A session that has not closed `seconds + 60` s after it began fails with `timeout` (§13.2)."""

_SAMPLE_BYTES = {"audio/pcm": 2, "audio/pcmu": 1, "audio/pcma": 1}
"""Bytes per sample of each GPT-Live audio format (gpt-live §5.3)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CallSettings:
    """What every session of a level shares."""

    url: str
    """WebSocket URL of the sessions endpoint, e.g. `ws://127.0.0.1:8000/v1/live/sessions`."""
    model: str
    """Sent as `session.model`."""
    voice: str | None
    """Sent as `session.audio.output.voice` when given."""
    instructions: str | None
    """Sent as `session.instructions` when given."""
    audio_format: str
    """`audio/pcm`, `audio/pcmu` or `audio/pcma`; always declared so a server refuses a mismatch."""
    rate: int
    """Sample rate in Hz of the audio sent and expected back."""
    seconds: float
    """Caller audio per session, in seconds; the input is looped to fill it."""
    chunk_ms: int
    """Append size in ms (20 ms = 480 samples at 24 kHz)."""
    playout_ms: int
    """The simulated player's start-up buffer in ms (120 by default)."""
    echo_rtt: bool = False
    """Stamp every caller frame and time its echo (`roundtrip`; `audio/pcm` at 24 kHz only)."""
    jitter: str = "none"
    """The caller's network (`bench.jitter.PROFILES`): when each chunk leaves against its deadline."""
    talk: str = "continuous"
    """How much of each minute the caller speaks (`bench.talk.PROFILES`; `audio/pcm` at 24 kHz
    unless `continuous`)."""
    store: bool = False
    """Sent as `session.store` true: a gateway with a store keeps the call (issue 45), so what
    storing costs a call is measured on the same figures as any other call."""

    @property
    def talk_profile(self) -> talk.Talk | None:
        """The talk profile's shape; None: the input looped as it is."""
        return talk.PROFILES[self.talk]

    @property
    def sample_bytes(self) -> int:
        """Bytes per sample on the wire."""
        return _SAMPLE_BYTES[self.audio_format]

    @property
    def chunk_bytes(self) -> int:
        """Bytes per append."""
        return self.rate * self.chunk_ms // 1000 * self.sample_bytes

    @property
    def chunks(self) -> int:
        """Appends per session: `ceil(seconds · 1000 / chunk_ms)`."""
        return -(-round(self.seconds * 1000) // self.chunk_ms)

    def start_event(self) -> bytes:
        """The `session.start` message; the format is always declared (§13.1)."""
        audio: dict[str, object] = {"format": {"type": self.audio_format, "rate": self.rate}}
        if self.voice is not None:
            audio["output"] = {"voice": self.voice}
        session: dict[str, object] = {"model": self.model, "audio": audio}
        if self.instructions is not None:
            session["instructions"] = self.instructions
        if self.store:
            session["store"] = True
        return orjson.dumps({"type": "session.start", "session": session})


@dataclasses.dataclass(slots=True)
class CallResult:
    """What one session measured; `record()` is its line in the JSON report."""

    ok: bool = False
    error: str | None = None
    started_ms: float | None = None
    close_reason: str | None = None
    frames: int = 0
    audio_s: float = 0.0
    underrun_ms: float = 0.0
    transcript: str = ""
    lateness_us: array.array = dataclasses.field(default_factory=lambda: array.array("q"))
    send_late_us: array.array = dataclasses.field(default_factory=lambda: array.array("q"))
    echo_rtt_us: array.array = dataclasses.field(default_factory=lambda: array.array("q"))
    """With `echo_rtt`: per caller frame heard back, its round trip in µs (`roundtrip`)."""
    arrivals_ns: array.array = dataclasses.field(default_factory=lambda: array.array("q"))
    """With `echo_rtt`: when each audio delta arrived (`perf_counter_ns`)."""
    echo_skipped: int = 0
    """With `echo_rtt`: frames never heard back between two that were."""
    echo_repeated: int = 0
    """With `echo_rtt`: frames heard back twice or out of order."""
    start_sent_ns: int = 0
    """When `session.start` left (`perf_counter_ns`)."""
    frame0_sent_ns: int = 0
    """When the chunk completing the caller's first 80 ms frame left."""
    first_audio_ns: int = 0
    """When the first audio delta arrived."""
    reaction_ns: int = 0
    """When the first audio delta arrived that can carry the model's reaction to the caller: the
    first after the caller's first frame was sent."""
    echo_silent: int = 0
    """With `echo_rtt`: silent frames heard between two stamped ones: ticks the caller's frame
    missed (the server's buffer ran dry), each an 80 ms underrun."""
    pauses: int = 0
    """`session.paused` events heard (the pod's idle pause)."""
    resumes: int = 0
    """`session.resumed` events heard."""
    wake_ms: array.array = dataclasses.field(default_factory=lambda: array.array("d"))
    """With a talk profile, per wake: speech onset sent to `session.resumed` heard (`talk.Wakes`)."""
    pre_roll_ms: array.array = dataclasses.field(default_factory=lambda: array.array("d"))
    """With a talk profile, per wake: audio from before the resume that the model heard."""
    onset_echo_ms: array.array = dataclasses.field(default_factory=lambda: array.array("d"))
    """With a talk profile, per wake: the speech onset frame sent to its echo heard (`talk.Wakes`)."""

    def since_start_us(self, at_ns: int) -> int | None:
        """µs from `session.start` to `at_ns` (None: it never happened)."""
        return (at_ns - self.start_sent_ns) // 1000 if at_ns and self.start_sent_ns else None

    def record(self) -> dict[str, object]:
        """The per-session record of the report (live-contract §13.5)."""
        late = percentiles.summarize(self.lateness_us)
        first, reaction = self.since_start_us(self.first_audio_ns), self.since_start_us(self.reaction_ns)
        return {
            "first_audio_ms": None if first is None else first / 1000,
            "first_reaction_ms": None if reaction is None else reaction / 1000,
            "ok": self.ok,
            "error": self.error,
            "started_ms": self.started_ms,
            "frames": self.frames,
            "audio_s": round(self.audio_s, 3),
            "underrun_ms": round(self.underrun_ms, 3),
            "late_p99_ms": late.p99,
            "late_max_ms": late.max,
            "close_reason": self.close_reason,
            "transcript": self.transcript,
            "pauses": self.pauses,
            "resumes": self.resumes,
            "wake_ms": list(self.wake_ms),
            "pre_roll_ms": list(self.pre_roll_ms),
            "onset_echo_ms": list(self.onset_echo_ms),
        }


class Tally:
    """Live counts of a crowd of sessions, for the progress display."""

    __slots__ = ("failed", "frames", "ok", "started")

    def __init__(self) -> None:
        self.started = 0
        self.ok = 0
        self.failed = 0
        self.frames = 0


def b64_length(text: str) -> int:
    """Decoded length of standard base64 `text`, padded or not, without decoding it."""
    n = len(text)
    pad = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    return n * 3 // 4 - pad if n % 4 == 0 else n * 3 // 4


async def call(settings: CallSettings, sound: bytes, start_at_ns: int, tally: Tally, seed: int = 0) -> CallResult:
    """Run one session that connects at `start_at_ns` (`perf_counter_ns` clock) and streams
    `sound` (caller audio in the session format, looped) through its network profile (seeded by
    `seed`). Never raises except on cancellation."""
    result = CallResult()
    late_ns = jitter.offsets(settings.jitter, settings.chunk_ms, settings.chunks, seed)
    wait_ns = start_at_ns - time.perf_counter_ns()
    if wait_ns > 0:
        await asyncio.sleep(wait_ns / 1e9)
    timeline = timeline_mod.Timeline(
        settings.rate, settings.sample_bytes, settings.playout_ms * 1_000_000
    )
    trips = roundtrip.RoundTrips() if settings.echo_rtt else None
    shape = settings.talk_profile
    wakes = None if shape is None else talk.Wakes(shape, talk.onset_frame(np.frombuffer(sound, "<i2")))
    try:
        async with asyncio.timeout(settings.seconds + TIMEOUT_SLACK_S):
            await _converse(settings, sound, late_ns, timeline, trips, wakes, result, tally)
    except TimeoutError:
        result.error = "timeout"
    except timeline_mod.TimelineError as exc:
        result.error = f"timeline: {exc}"
    except (OSError, ws_exceptions.WebSocketException) as exc:
        result.error = f"connect failed: {type(exc).__name__}: {exc}"
    result.frames = timeline.frames
    result.audio_s = timeline.audio_ms / 1000
    result.underrun_ms = timeline.underrun_ms
    result.transcript = "".join(timeline.transcript)
    result.lateness_us = timeline.lateness_us
    if trips is not None:
        result.echo_rtt_us, result.arrivals_ns = trips.rtt_us, trips.arrivals_ns
        result.echo_skipped, result.echo_repeated, result.echo_silent = trips.skipped, trips.repeated, trips.silent
    if wakes is not None:
        result.wake_ms, result.pre_roll_ms, result.onset_echo_ms = wakes.wake_ms, wakes.pre_roll_ms, wakes.onset_echo_ms
    if result.error is None:
        if result.close_reason is None:
            result.error = "socket ended without session.closed"
        elif result.close_reason != "close_requested":
            result.error = f"session closed: {result.close_reason}"
    result.ok = result.error is None
    if result.ok:
        tally.ok += 1
    else:
        tally.failed += 1
    return result


async def _converse(
    settings: CallSettings,
    sound: bytes,
    late_ns: list[int],
    timeline: timeline_mod.Timeline,
    trips: roundtrip.RoundTrips | None,
    wakes: talk.Wakes | None,
    result: CallResult,
    tally: Tally,
) -> None:
    """Connect, start, stream and read until `session.closed` or the socket ends."""
    connect_ns = time.perf_counter_ns()
    async with ws_client.connect(
        settings.url,
        max_size=events.MAX_MESSAGE_BYTES,
        compression=None,
        ping_interval=None,
        open_timeout=settings.seconds + TIMEOUT_SLACK_S,
    ) as ws:
        result.start_sent_ns = time.perf_counter_ns()
        await ws.send(settings.start_event().decode())
        first = orjson.loads(await ws.recv())
        if first.get("type") != "session.started":
            result.error = _unexpected(first)
            return
        if settings.store and first["session"].get("store") is not True:
            result.error = "store: true asked, but session.started says the call is not stored"
            return
        started_ns = time.perf_counter_ns()
        result.started_ms = (started_ns - connect_ns) / 1e6
        tally.started += 1
        writer = asyncio.create_task(_write(ws, settings, sound, late_ns, started_ns, result, trips, wakes))
        try:
            await _read(ws, timeline, trips, wakes, result, tally)
        finally:
            if not writer.done():
                writer.cancel()
            # The writer's own failure (the socket closing under it) is already visible as the
            # reader's outcome; retrieve it so it is not logged as unretrieved.
            await asyncio.gather(writer, return_exceptions=True)


async def _read(
    ws: ws_client.ClientConnection,
    timeline: timeline_mod.Timeline,
    trips: roundtrip.RoundTrips | None,
    wakes: talk.Wakes | None,
    result: CallResult,
    tally: Tally,
) -> None:
    """Account every server event until `session.closed`, an error event, or the socket ends."""
    prefix_len = len(events.AUDIO_DELTA_PREFIX)
    try:
        async for message in ws:
            arrival_ns = time.perf_counter_ns()
            if isinstance(message, str) and message.startswith(events.AUDIO_DELTA_PREFIX):
                if not result.reaction_ns:
                    _first_audio(result, arrival_ns)
                timeline.audio(arrival_ns, b64_length(message[prefix_len:-2]))
                if trips is not None:
                    trips.heard(message[prefix_len:prefix_len + roundtrip.STAMP_B64_CHARS], arrival_ns)
                if wakes is not None:
                    wakes.heard(message[prefix_len:prefix_len + talk.STAMP_B64_CHARS], arrival_ns)
                tally.frames += 1
                continue
            event = orjson.loads(message)
            kind = event.get("type")
            if kind == "session.output_audio.delta":
                if not result.reaction_ns:
                    _first_audio(result, arrival_ns)
                timeline.audio(arrival_ns, len(base64.b64decode(event["delta"])))
                if trips is not None:
                    trips.heard(event["delta"], arrival_ns)
                if wakes is not None:
                    wakes.heard(event["delta"], arrival_ns)
                tally.frames += 1
            elif kind == "session.output_transcript.delta":
                timeline.text(int(event["start_ms"]), str(event["delta"]))
            elif kind == "session.paused":  # the pod's idle pause: no audio until session.resumed
                result.pauses += 1
            elif kind == "session.resumed":
                result.resumes += 1
                timeline.resume()
                if wakes is not None:
                    wakes.resumed(arrival_ns)
            elif kind == "session.closed":
                result.close_reason = str(event.get("reason"))
                return
            elif kind == "error":
                result.error = _unexpected(event)
                return
    except ws_exceptions.ConnectionClosed:
        return


async def _write(
    ws: ws_client.ClientConnection,
    settings: CallSettings,
    sound: bytes,
    late_ns: list[int],
    start_ns: int,
    result: CallResult,
    trips: roundtrip.RoundTrips | None,
    wakes: talk.Wakes | None = None,
) -> None:
    """Send chunk `k` at `start_ns + k · chunk_ms + late_ns[k]`, looping `sound`, then `session.close`.

    Records each chunk's send lateness in µs, so a slow client is not mistaken for a slow
    server (performance.md §1); with `trips`, stamps the frames and records when each was sent
    (before the send, so an echo can never be read before its frame counts as sent).
    """
    size = settings.chunk_bytes
    send_late_us = result.send_late_us
    frame0 = -(-settings.rate * settings.sample_bytes * 80 // 1000 // size) - 1
    """The chunk that completes the caller's first 80 ms frame."""
    looped = sound + sound[:size]
    chunk_ns = settings.chunk_ms * 1_000_000
    for k in range(settings.chunks):
        due_ns = start_ns + k * chunk_ns + late_ns[k]
        wait_ns = due_ns - time.perf_counter_ns()
        if wait_ns > 0:
            await asyncio.sleep(wait_ns / 1e9)
        offset = k * size % len(sound)
        pcm = looped[offset : offset + size]
        if trips is not None:
            pcm = roundtrip.stamp(pcm, k * size)
        audio = base64.b64encode(pcm).decode()
        now_ns = time.perf_counter_ns()
        send_late_us.append(max(0, now_ns - due_ns) // 1000)
        if trips is not None:
            trips.sent((k + 1) * size, now_ns)
        if wakes is not None:
            wakes.sent((k + 1) * size, now_ns)
        if k == frame0:
            result.frame0_sent_ns = now_ns
        await ws.send('{"type":"session.input_audio.append","audio":"' + audio + '"}')
    await ws.send('{"type":"session.close"}')


def _first_audio(result: CallResult, arrival_ns: int) -> None:
    """Time to first audio, and to the first audio that can carry a reaction to the caller."""
    if not result.first_audio_ns:
        result.first_audio_ns = arrival_ns
    if result.frame0_sent_ns and arrival_ns > result.frame0_sent_ns:
        result.reaction_ns = arrival_ns


def _unexpected(event: dict[str, object]) -> str:
    """The error text of a session that got an `error` or an unexpected first event."""
    if event.get("type") == "error":
        return "server error: " + orjson.dumps(event.get("error")).decode()
    return f"unexpected event before session.started: {event.get('type')!r}"
