"""The wake machine: when a quiet caller's session leaves the engine's batch, and when its speech
brings it back (issue 43, docs/pause.md). Sans I/O, like `gptlive.connection`.

Fed one 80 ms caller frame at a time (its PCM, the detector's speech probability, and whether the
model spoke since the last frame), it answers commands for the pod's shell (`pod.pause`): feed the
frame to the engine, pause (export the session and say `session.paused`), or wake (resume it and
feed the pre-roll: the last `pre_roll_frames` frames, the waking one last, so the first syllable
reaches the model). Which input does what in which phase is the `TABLE` below and nowhere else.

Inactivity is counted on the caller's frames: a caller that sends no audio is never paused (and
could never be woken by speech either).
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass

from liveplex.live import frames

PRE_ROLL_FRAMES = 3
"""240 ms: above the 200 ms the issue asks for, and with the partial frame a handover blob carries
it still fits the engine's 4-frame jitter cap (320 ms), so no pre-roll frame is dropped on arrival."""


HANGOVER_FRAMES = 5
"""While active, a caller frame within this many frames (400 ms) of a speech frame is not measured:
it counts as speech (a VAD's hangover). A caller who keeps talking then costs one detector call in
six instead of every frame (the detector was most of an always-talking pod's CPU: docs/bench.md),
and an idle pause comes at most 400 ms later than it would with every frame measured."""


class Phase(enum.Enum):
    WAITING = "waiting"
    """Connected, not yet woken (a `wake_policy` call before its first speech): billed as paused;
    its first wake says `session.resumed`, no `session.paused` came before it."""
    ACTIVE = "active"
    """In the engine's batch: frames go to the model."""
    PAUSED = "paused"
    """Out of the batch, its state kept: frames go to the pre-roll ring only."""


class Heard(enum.Enum):
    """What one input was, as the table reads it."""

    QUIET = "quiet"
    """A caller frame below the threshold, the model silent."""
    SPEECH = "speech"
    """A caller frame at or above the threshold, or the model spoke."""
    IDLE = "idle"
    """A quiet frame that completes `idle_frames` of inactivity."""
    STAYED = "stayed"
    """The pause could not take the session out (it ends at the next tick anyway, or the engine
    stopped): it stays in the batch."""
    REFUSED = "refused"
    """A wake found no free slot: the session stays out, and the next speech frame tries again."""


class Do(enum.Enum):
    FEED = "feed"
    KEEP = "keep"
    PAUSE = "pause"
    WAKE = "wake"
    FLUSH = "flush"
    """Feed the frames the ring kept (a pause that did not happen)."""
    NOTHING = "nothing"


TABLE: dict[tuple[Phase, Heard], tuple[Phase, Do]] = {
    (Phase.ACTIVE, Heard.QUIET): (Phase.ACTIVE, Do.FEED),
    (Phase.ACTIVE, Heard.SPEECH): (Phase.ACTIVE, Do.FEED),
    (Phase.ACTIVE, Heard.IDLE): (Phase.PAUSED, Do.PAUSE),
    (Phase.PAUSED, Heard.QUIET): (Phase.PAUSED, Do.KEEP),
    (Phase.PAUSED, Heard.SPEECH): (Phase.ACTIVE, Do.WAKE),
    (Phase.PAUSED, Heard.STAYED): (Phase.ACTIVE, Do.FLUSH),
    (Phase.WAITING, Heard.QUIET): (Phase.WAITING, Do.KEEP),
    (Phase.WAITING, Heard.SPEECH): (Phase.ACTIVE, Do.WAKE),
    (Phase.ACTIVE, Heard.REFUSED): (Phase.PAUSED, Do.NOTHING),
}
"""(phase, what was heard) -> (next phase, what to do). A pair not here does nothing (a `STAYED`
or `REFUSED` that comes late, a quiet model frame while paused)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One session's wake rules (GPT-Live's `wake_policy` and `idle_timeout_s`)."""

    vad_threshold: float = 0.5
    """A frame whose speech probability is at least this is speech (0..1 inclusive: the bounds
    are `events.wake_bounds`'s)."""
    idle_timeout_s: int | None = None
    """Whole seconds without caller or model speech before the session pauses; None: never."""
    wait_first: bool = False
    """The call starts `WAITING` (a `wake_policy`): inference starts at the first speech."""
    pre_roll_frames: int = PRE_ROLL_FRAMES

    @property
    def idle_frames(self) -> int | None:
        """`idle_timeout_s` in whole frames, rounded up (3 s: 38 frames of 80 ms)."""
        if self.idle_timeout_s is None:
            return None
        return math.ceil(self.idle_timeout_s * 1000 / frames.FRAME_MS)


@dataclass(frozen=True, slots=True)
class Feed:
    """Give the engine these frames, in order."""

    pcm: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Pause:
    """Take the session out of the batch (its state kept); say `session.paused` once it is out."""


@dataclass(frozen=True, slots=True)
class Wake:
    """Bring the session back and feed it `pre_roll` first; say `session.resumed` once it runs."""

    pre_roll: tuple[bytes, ...]


Command = Feed | Pause | Wake


class Machine:
    """One session's wake state; see the module docstring."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.phase = Phase.WAITING if policy.wait_first else Phase.ACTIVE
        self._idle = 0
        """Quiet frames in a row while active."""
        self._since_speech = HANGOVER_FRAMES
        """Frames since the last speech frame while active (`HANGOVER_FRAMES` and more: none lately)."""
        self._idle_frames = policy.idle_frames
        self._ring: deque[bytes] = deque(maxlen=policy.pre_roll_frames)

    def measures(self, model_spoke: bool) -> bool:
        """Whether the next frame's speech probability can change anything: not when the model
        spoke (that is speech), nor while active within `HANGOVER_FRAMES` of a speech frame."""
        return not model_spoke and (self.phase is not Phase.ACTIVE or self._since_speech >= HANGOVER_FRAMES)

    def frame(self, pcm: bytes, prob: float | None, model_spoke: bool) -> Command | None:
        """One caller frame: `prob` its speech probability, None where `measures` said it need not
        be measured (it counts as speech); `model_spoke`: since the last frame."""
        if prob is None or prob >= self.policy.vad_threshold or model_spoke:
            heard = Heard.SPEECH
            measured = prob is not None and prob >= self.policy.vad_threshold
            self._since_speech = 0 if measured or model_spoke else self._since_speech + 1
        elif self.phase is Phase.ACTIVE and self._idle_frames is not None and self._idle + 1 >= self._idle_frames:
            heard = Heard.IDLE
        else:
            heard = Heard.QUIET
        if heard is not Heard.SPEECH:
            self._since_speech = HANGOVER_FRAMES
        return self._step(heard, pcm)

    def stayed(self) -> Command | None:
        """The pause did not take the session out: the frames kept meanwhile go to the engine."""
        return self._step(Heard.STAYED, b"")

    def refused(self) -> Command | None:
        """The wake found no slot: out again, its pre-roll refilled by the frames to come."""
        return self._step(Heard.REFUSED, b"")

    @property
    def kept(self) -> tuple[bytes, ...]:
        """The frames the ring holds now (a move carries them)."""
        return tuple(self._ring)

    def arrived(self, kept: tuple[bytes, ...], waiting: bool = False) -> None:
        """The session continues here after a move (`pause.Moved`), paused, or `waiting` for its
        first speech (it never ran): `kept` its ring."""
        self.phase = Phase.WAITING if waiting else Phase.PAUSED
        self._idle = 0
        self._ring.clear()
        self._ring.extend(kept)

    def _step(self, heard: Heard, pcm: bytes) -> Command | None:
        found = TABLE.get((self.phase, heard))
        if found is None:
            return None
        self.phase, do = found
        if do is Do.FEED:
            self._idle = 0 if heard is Heard.SPEECH else self._idle + 1
            return Feed((pcm,))
        if do is Do.NOTHING:
            return None
        self._idle = 0
        if do is Do.FLUSH:
            kept = tuple(self._ring)
            self._ring.clear()
            return Feed(kept)
        self._ring.append(pcm)
        if do is Do.KEEP:
            return None
        if do is Do.PAUSE:
            return Pause()
        kept = tuple(self._ring)
        self._ring.clear()
        return Wake(kept)


def most_paused(max_paused: int, budget_bytes: int, park_bytes: int) -> int:
    """Sessions a pod may hold paused: `max_paused`, and no more than a host budget of
    `budget_bytes` holds at `park_bytes` a session (budget 0: no byte bound; `park_bytes` 0: not
    known until the pod's first pause, and until then every session it admits has a slot anyway)."""
    if budget_bytes == 0 or park_bytes == 0:
        return max_paused
    return min(max_paused, budget_bytes // park_bytes)


def may_pause(paused: int, leaving: int, parked_bytes: int, park_bytes: int, max_paused: int,
              budget_bytes: int) -> bool:
    """Whether one more session may leave the batch, `leaving` pauses still on their way out: the
    pod holds fewer than `max_paused` and, with a host budget of `budget_bytes` (0: none), one more
    park of `park_bytes` fits beside the `parked_bytes` held and those leaving. Before the pod knows
    a park's size (`park_bytes` 0) one pause leaves at a time: the first teaches it. A pause it
    refuses keeps its session in the batch."""
    if paused + leaving >= max_paused:
        return False
    if budget_bytes == 0:
        return True
    if park_bytes == 0:
        return leaving == 0
    return parked_bytes + (leaving + 1) * park_bytes <= budget_bytes


def free_slots(slots: int, active: int, paused: int, reserve: int, max_paused: int) -> int:
    """How many more sessions a pod with `slots` engine slots admits: `active` run in the batch,
    `paused` wait out of it. A new session starts active, so it needs a slot beyond those kept for
    wakes (one per paused session, up to `reserve`), and the pod holds at most `max(slots,
    max_paused)` sessions in all, so that every one of them may pause within the host budget
    (`max_paused`, `most_paused` of it; below `slots`: a pause past the budget keeps its session in
    the batch). What the heartbeat publishes and `start` checks."""
    in_batch = slots - active - min(reserve, paused)
    on_host = max(slots, max_paused) - active - paused
    return max(0, min(in_batch, on_host))
