"""A hand-played engine for socket tests; pods themselves come from `tests.support.pods`."""

from __future__ import annotations

from liveplex.live import channel, contract
from liveplex.live.jitter import Jitter
from liveplex.live.line import Line


class Stubborn:
    """A hand-played engine: starts sessions and says silence, but never answers a hangup,
    and says `pcm` instead of a frame when told to (to make the front end trip)."""

    def __init__(self, pcm: bytes = bytes(3840)) -> None:
        self.lines: list[Line] = []
        self.hung_up: list[bool] = []
        self.pcm = pcm

    def sessions(self) -> int:
        return len(self.lines)

    def take(self, sub: channel.LiveSubmission) -> None:
        line = Line.start(sub, Jitter(1920, 2, 4), 10_000)
        if line is not None:
            self.lines.append(line)

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        for line in self.lines:
            line.listen()
            line.say(self.pcm, None)
        self.hung_up = [line.input.closed for line in self.lines]

    def abort(self) -> None:
        for line in self.lines:
            line.close(contract.CloseReason.ABORTED)
        self.lines = []
