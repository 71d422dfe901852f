"""`liveplex bench record`'s measurements (`liveplex.bench.record` parses the flags, then imports
this: the PersonaPlex engine's chunk, which needs torch). See that module for the figures.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from liveplex.continuity import blob, record
from liveplex.engine_pod import handover as pp_handover
from liveplex.engine_pod import program
from liveplex.engine_pod.history import History
from liveplex.gptlive.server import hop
from liveplex.live import by_hand, channel, contract, frames
from liveplex.pod import backend
from liveplex.sim_pod import SimEngine, SimProfile


def _sim(n: int, checkpoints: bool) -> tuple[SimEngine, list[channel.Opened], channel.LiveInbox]:
    profile = SimProfile(max_sessions=n)
    handle, inbox = by_hand.live_channel(profile.info())
    engine = SimEngine(profile)
    opened: list[channel.Opened] = []
    for _ in range(n):
        got = handle.start(contract.Session("NATF2", ""), checkpoints)
        assert isinstance(got, channel.Opened)  # n sessions fit the profile's n slots
        opened.append(got)
    for sub in inbox.drain_nowait():
        assert isinstance(sub, channel.LiveSubmission)  # only starts were queued
        engine.take(sub)
    return engine, opened, inbox


def sim_tick_us(n: int, ticks: int) -> dict[str, float]:
    """Tick time of n sessions with and without checkpoints, interleaved; µs per session per tick."""
    pcm = (np.sin(np.arange(frames.FRAME_SAMPLES) * 0.05) * 9000).astype("<i2").tobytes()
    runs = {flag: _sim(n, flag) for flag in (True, False)}
    times: dict[bool, list[int]] = {True: [], False: []}
    for t in range(ticks):
        for flag in ((True, False) if t % 2 else (False, True)):
            engine, opened, _ = runs[flag]
            for o in opened:
                o.audio.send(pcm)
            started = time.perf_counter_ns()
            engine.tick(0)
            times[flag].append(time.perf_counter_ns() - started)
            for o in opened:
                o.output.drain()
    on, off = statistics.median(times[True]) / 1e3, statistics.median(times[False]) / 1e3
    return {"with_us": round(on, 1), "without_us": round(off, 1), "per_session_us": round((on - off) / n, 3)}


def chunk_us(repeats: int = 20_000) -> float:
    """PersonaPlex's `TICKS` chunk, as `engine_pod.handover.checkpoint` makes it, mid-call."""
    history = History(50, np.zeros((1500, 17), np.uint16), 3000)
    row = np.zeros(program.PACKED_WIDTH, np.int32)
    started = time.perf_counter_ns()
    for k in range(repeats):
        tail = row[program.TAIL].astype("<u2")
        record.ticks(k, 1, history.columns()[-1:].tobytes(), tail.tobytes())
    return (time.perf_counter_ns() - started) / repeats / 1e3


class _Drop:
    """A peer that takes what a leg gives it and does nothing (the socket's cost is not ours)."""

    def deliver(self, outputs: list[contract.Output]) -> None: ...

    def send_verbatim(self, text: str, frame: bool) -> None: ...


def event_us(data: bytes, repeats: int = 20_000) -> float:
    """The leg's split of a tick's [Audio, Checkpoint] and the event's text (a leg without
    checkpoints does none of it)."""
    handle, _ = by_hand.live_channel(SimProfile().info())
    opened = handle.start(contract.Session("NATF2", ""))
    assert isinstance(opened, channel.Opened)
    leg = backend.EngineLeg(opened, _Drop(), True)  # type: ignore[arg-type]
    audio = contract.Audio(0, bytes(3840))
    outputs = [audio, contract.Checkpoint(data)]
    started = time.perf_counter_ns()
    for _ in range(repeats):
        leg._checkpointed(outputs)
    return (time.perf_counter_ns() - started) / repeats / 1e3


def sizes() -> dict[str, object]:
    """Bytes of each chunk kind; the PersonaPlex head at a 30-column role prompt."""
    header = blob.Header(pp_handover.KIND, "personaplex-7b", 3000, "NATF2", 1,
                         {"schedule": "upstream", "dtype": "bf16"}, {"first": 50, "pos": 81, "key": 1 << 31})
    pp_head = record.head(header, {"history": np.zeros((31, 17), np.uint16),
                                   "tail": np.zeros(pp_handover.TAIL_IDS, np.uint16)},
                          pp_handover.COLUMN_BYTES, 2 * pp_handover.TAIL_IDS)
    pp_tick = record.ticks(1, 1, bytes(pp_handover.COLUMN_BYTES), bytes(2 * pp_handover.TAIL_IDS))
    sim_tick = record.ticks(1, 1, b"", bytes(8))
    per_min = 60 * frames.SAMPLE_RATE // frames.FRAME_SAMPLES
    return {"personaplex": {"head_bytes": len(pp_head), "tick_bytes": len(pp_tick),
                            "per_minute_bytes": per_min * len(pp_tick),
                            "event_text_bytes": len(hop.checkpoint_event(pp_tick))},
            "sim": {"tick_bytes": len(sim_tick), "per_minute_bytes": per_min * len(sim_tick),
                    "event_text_bytes": len(hop.checkpoint_event(sim_tick))}}


def report(sessions: int, ticks: int) -> dict[str, object]:
    """Every figure, as `liveplex bench record` prints it."""
    pp_tick = record.ticks(1, 1, bytes(pp_handover.COLUMN_BYTES), bytes(2 * pp_handover.TAIL_IDS))
    return {"sessions": sessions, "ticks": ticks, "sim_tick": sim_tick_us(sessions, ticks),
            "personaplex_chunk_us": round(chunk_us(), 3), "event_us": round(event_us(pp_tick), 3), "sizes": sizes()}
