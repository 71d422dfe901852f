"""The values that cross between front end and engine: what is served, a session, its outputs.

Everything here is plain data. The channel that carries it lives in `liveplex.live.channel`.
The engine never validates a `Session` again: one exists only if `LiveInfo.check` accepted it
(live-contract §3, "parse, don't validate").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class CheckError(ValueError):
    """A session draft the engine cannot serve; `param` is relative to the session config."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@dataclass(frozen=True, slots=True)
class SessionDraft:
    """What the caller asked for, after the front end mapped voice names to native ones."""

    voice: str | None = None
    instructions: str | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """An accepted session: a native voice and the role prompt, defaults filled in."""

    voice: str
    instructions: str


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What an engine serves; fixed at engine start, shared read-only by front end and engine."""

    model: str
    """Served model id, e.g. "personaplex-7b" or "liveplex-sim"."""
    sample_rate: int
    """Hz, in and out (24000)."""
    frame_samples: int
    """Samples per frame and per tick (1920)."""
    voices: tuple[str, ...]
    """Sorted native voice names."""
    default_voice: str
    default_instructions: str
    max_instructions_chars: int
    """Role-prompt limit in Unicode code points (`len(str)`)."""
    max_sessions: int
    """Admission cap; one more start is answered busy."""
    max_frames: int
    """Session length in frames; the session runs exactly this many."""
    context_frames: int = 0
    """Frames the model's context window holds (PersonaPlex: its ring); 0 when the engine has
    none to report. `session.usage.updated` reports the share of it a session fills."""
    tick_groups: int = 1
    """Groups of sessions the engine ticks at offsets of a period / `tick_groups` (`live/drive.py`)."""
    engine: tuple[tuple[str, str], ...] = ()
    """How the engine runs, as (name, value) pairs the front end publishes unchanged in
    `/live/config`, `/live/stats` and the `liveplex_engine_info` metric (PersonaPlex: `schedule`)."""

    def frame_ms(self, n: int) -> int:
        """Milliseconds covered by `n` frames (80 n with the defaults)."""
        return n * self.frame_samples * 1000 // self.sample_rate

    def period_ns(self) -> int:
        """Nanoseconds per tick (80 ms with the defaults)."""
        return self.frame_samples * 1_000_000_000 // self.sample_rate

    def frames_in(self, length_ns: int) -> int:
        """Whole frames in `length_ns`, floored: 240 s -> 3000, 500 ms -> 6."""
        return length_ns // self.period_ns()

    def check(self, draft: SessionDraft) -> Session:
        """Fill defaults and accept the draft, or raise `CheckError` naming the parameter."""
        voice = self.default_voice if draft.voice is None else draft.voice
        if voice not in self.voices:
            raise CheckError("audio.output.voice", f"unknown voice {voice!r}")
        text = draft.instructions
        if text is None or not text.strip():
            text = self.default_instructions
        if len(text) > self.max_instructions_chars:
            raise CheckError(
                "instructions",
                f"instructions are {len(text)} characters; the limit is {self.max_instructions_chars}",
            )
        return Session(voice=voice, instructions=text)


class CloseReason(enum.Enum):
    """Why the engine ended a session (live-contract §4.2)."""

    EXPIRED = "expired"
    """The session ran `max_frames` frames."""
    BUSY = "busy"
    """`max_sessions` sessions were already running (or the engine queue was full)."""
    ABORTED = "aborted"
    """The engine gave up: shutdown, fault, or failed session setup."""
    HANGUP = "hangup"
    """The front end closed the session's audio sender."""
    HANDED_OVER = "handed_over"
    """The session left this engine as a handover blob (`LiveHandle.export`); another continues it."""


@dataclass(frozen=True, slots=True)
class Started:
    """The session runs; sent once, first."""

    frames: int = 0
    """Frames it ran elsewhere before (a handover, docs/continuity.md): its frame numbers, usage
    and context count on from them."""


@dataclass(frozen=True, slots=True)
class Audio:
    """Frame `frame` of model audio: `frame_samples * 2` bytes of s16le."""

    frame: int
    pcm: bytes


@dataclass(frozen=True, slots=True)
class Text:
    """Words spoken with frame `frame`; sent right after that frame's `Audio`; never empty."""

    frame: int
    delta: str


@dataclass(frozen=True, slots=True)
class Closed:
    """The end of a session, always last; counts for usage and metrics."""

    reason: CloseReason
    frames: int
    """Frames run."""
    underruns: int
    """Dry spells of the jitter buffer."""
    dropped: int
    """Caller samples dropped by the jitter cap."""

    @staticmethod
    def refused(reason: CloseReason) -> Closed:
        """A session that never ran: no `Started` precedes this."""
        return Closed(reason, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A piece of the session's resume record (`liveplex.continuity.record`), sent after a tick's
    frame only to sessions started with `checkpoints`: what another engine needs to rebuild the
    session if this one is lost (docs/continuity.md)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Paused:
    """The session left the batch for its caller's silence (docs/pause.md): made by the pod's
    pause, never by an engine, so that the front end says `session.paused` in its order."""


@dataclass(frozen=True, slots=True)
class Resumed:
    """The session is back in the batch after `paused_frames` frames out of it (made by the pod:
    they count as paused time); `woke` False: it ends paused, only the time is told."""

    paused_frames: int
    woke: bool = True


Output = Started | Audio | Text | Checkpoint | Closed | Paused | Resumed
"""What a session's sink receives, in order: Started, then Audio (+Text, +Checkpoint) per tick,
then Closed; a pausing pod puts Paused and Resumed between ticks."""
