"""`Line`: a running session inside the engine, numbering its frames and closing it once.

live-contract §9. Frame n of a session is the n-th frame the engine ran for it, so the model's
audio is one contiguous stream; a session runs exactly `max_frames` frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from liveplex.live import contract
from liveplex.live.channel import AudioReceiver, LiveSubmission, OutputSink
from liveplex.live.jitter import Jitter


@dataclass(frozen=True, slots=True)
class Carried:
    """What a line carries to another engine: its buffered caller audio and its counters, plain
    values (`liveplex.continuity.carried` writes them into a blob and checks them on the way back)."""

    pending: bytes
    """Buffered caller PCM (s16le), not yet played."""
    odd: bytes
    """The odd byte of a push not yet paired (zero or one byte)."""
    playing: bool
    underruns: int
    dropped: int


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
        elsewhere (a handover), so its numbering goes on; time it spent paused
        (`sub.outside_frames`) comes off `max_frames`."""
        if not sub.sink.send(contract.Started(frames)):
            sub.sink.drop()
            return None
        line = Line(sub.input, sub.sink, jitter, max_frames - sub.outside_frames, sub.id, sub.session)
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

    def hand_over(self) -> Carried | None:
        """Leave this engine at a tick boundary: the caller audio queued so far joins the jitter
        buffer, the sink gets `Closed(HANDED_OVER)`, and what the line carries comes back. None,
        and nothing changes, when the session ends at the next tick anyway (hung up or expired):
        it is not moved."""
        if self.input.closed or self.frames >= self.max_frames:
            return None
        for at, chunk in self.input.drain():
            self.jitter.push(chunk, at)
        j = self.jitter
        carried = Carried(j.pending(), j.odd, j.playing, j.underruns, j.dropped)
        self.close(contract.CloseReason.HANDED_OVER)
        return carried

    @staticmethod
    def restore(jitter: Jitter, carried: Carried) -> None:
        """Load what another engine's line carried into `jitter`, before `start`; raises
        `ValueError` when it does not fit this buffer."""
        jitter.restore(carried.pending, carried.odd, carried.playing, carried.underruns, carried.dropped)

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
