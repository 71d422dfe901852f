"""`Line`: a running session inside the engine, numbering its frames and closing it once.

live-contract §9. Frame n of a session is the n-th frame the engine ran for it, so the model's
audio is one contiguous stream; a session runs exactly `max_frames` frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from liveplex.continuity import blob, errors
from liveplex.live import contract
from liveplex.live.channel import AudioReceiver, LiveSubmission, OutputSink
from liveplex.live.jitter import Jitter


class Line:
    """One session's caller audio, its output sink and its frame count."""

    __slots__ = ("input", "sink", "jitter", "frames", "max_frames", "id", "session", "checkpoints")

    def __init__(self, input: AudioReceiver, sink: OutputSink, jitter: Jitter, max_frames: int,
                 id: int = 0, session: contract.Session | None = None) -> None:
        self.id = id
        """The submission's id (`Opened.id`): what `LiveHandle.export` names."""
        self.session = session
        """What the session was accepted as (its voice goes in a handover's header)."""
        self.input = input
        self.sink = sink
        self.jitter = jitter
        self.frames = 0
        """Frames run; the next frame's number."""
        self.max_frames = max_frames
        self.checkpoints = False
        """The session's outputs carry its resume record (`LiveSubmission.checkpoints`)."""

    @staticmethod
    def start(sub: LiveSubmission, jitter: Jitter, max_frames: int, frames: int = 0) -> Line | None:
        """Send `Started`; None when nobody is listening any more. `frames`: the frames it ran
        elsewhere (a handover), so its numbering goes on."""
        if not sub.sink.send(contract.Started(frames)):
            sub.sink.drop()
            return None
        line = Line(sub.input, sub.sink, jitter, max_frames, sub.id, sub.session)
        line.frames = frames
        line.checkpoints = sub.checkpoints
        return line

    def listen(self) -> contract.CloseReason | None:
        """Take the caller's queued audio; say why the session must end now, if it must."""
        hung_up = self.input.closed  # read before draining: chunks queued before a hangup count
        push = self.jitter.push
        for at, chunk in self.input.drain():  # a push per chunk: each frame's arrival is known
            push(chunk, at)
        if hung_up:
            return contract.CloseReason.HANGUP
        if self.frames >= self.max_frames:
            return contract.CloseReason.EXPIRED
        return None

    def hand_over(self) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
        """Leave this engine at a tick boundary: the caller audio queued so far joins the jitter
        buffer, the sink gets `Closed(HANDED_OVER)`, and the line's part of the blob comes back
        (header scalars, arrays). None, and nothing changes, when the session ends at the next
        tick anyway (hung up or expired): it is not moved."""
        if self.input.closed or self.frames >= self.max_frames:
            return None
        for at, chunk in self.input.drain():
            self.jitter.push(chunk, at)
        j = self.jitter
        scalars = {"odd": j.odd.hex(), "playing": j.playing, "underruns": j.underruns, "dropped": j.dropped}
        arrays = {"jitter": np.frombuffer(j.pending(), np.uint8)}
        self.close(contract.CloseReason.HANDED_OVER)
        return scalars, arrays

    @staticmethod
    def resume(sub: LiveSubmission, jitter: Jitter, max_frames: int, h: blob.Handover) -> Line | None:
        """`start` for a session continuing from handover `h` (the part `hand_over` wrote): frame
        numbers, counters and buffered caller audio go on. Raises `HandoverError` before
        `Started` is sent when that part does not fit."""
        Line.restore(jitter, max_frames, h)
        return Line.start(sub, jitter, max_frames, h.header.frames)

    @staticmethod
    def restore(jitter: Jitter, max_frames: int, h: blob.Handover) -> None:
        """Load the jitter part of handover `h` into `jitter`, checking it and the frame count
        against this engine (`HandoverError`); `resume` without the start."""
        try:
            jitter.restore(h.array("jitter", "|u1", (None,)).tobytes(), bytes.fromhex(h.scalar("odd", str)),
                           h.scalar("playing", bool), h.scalar("underruns", int), h.scalar("dropped", int))
        except ValueError as exc:  # a bad hex string, or a buffer past this engine's cap
            raise errors.state(("arrays", "jitter"), str(exc)) from None
        if not 0 <= h.header.frames < max_frames:
            raise errors.state(("header", "frames"), f"is {h.header.frames}, outside 0..{max_frames - 1}")

    def commentary(self) -> list[str]:
        """Texts the caller's app asked the model to say since the last call, oldest first."""
        return self.input.drain_texts()

    def hear(self, skipped: int, due_ns: int | None = None) -> np.ndarray:
        """This tick's caller frame (float32), after discarding the audio of skipped ticks;
        `due_ns`, when the tick was due, lets an adaptive buffer measure the frame's wait."""
        if skipped:
            self.jitter.skip(skipped)
        return self.jitter.pop(due_ns)

    def hear_pcm(self, skipped: int, due_ns: int | None = None) -> bytes:
        """`hear` as s16le bytes, untouched (`Jitter.pop_pcm`), for engines that want the PCM."""
        if skipped:
            self.jitter.skip(skipped)
        return self.jitter.pop_pcm(due_ns)

    def say(self, pcm: bytes, text: str | None) -> bool:
        """Emit this tick's frame and its words; False means drop the line without `Closed`."""
        frame = self.frames
        self.frames += 1
        ok = self.sink.send(contract.Audio(frame, pcm))
        if text:
            ok = self.sink.send(contract.Text(frame, text)) and ok
        if not ok:
            self.sink.drop()
        return ok

    def checkpoint(self, data: bytes) -> None:
        """Send a piece of the session's resume record (`liveplex.continuity.record`) after this
        tick's frame; a receiver gone is seen by the next `say`."""
        self.sink.send(contract.Checkpoint(data))

    def close(self, reason: contract.CloseReason) -> None:
        """Send the last output, with the counts, and let go of the sink."""
        self.sink.send(contract.Closed(reason, self.frames, self.jitter.underruns, self.jitter.dropped))
        self.sink.drop()
