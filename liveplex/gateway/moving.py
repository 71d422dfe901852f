"""`Moving`: how a relayed session leaves a draining pod for another (issue 24 Part 2), as a sans-I/O
machine.

A pod that drains writes `hop.MOVE_REQUESTED` on the socket of each session a gateway relays to it.
The relayed session's machine (`relaying.Relaying`) starts a `Moving` and feeds it each outcome
of the I/O it asks for, which the relay's shell (`relay.UpstreamLeg`) performs; `Moving` answers
with the next `Command`, reads no clock and knows no socket, so every rule is tested directly
(tests/gateway/test_moving.py). What the client's frames do meanwhile (`holding`, `copying`) and
what a move's end means for the session are `Relaying`'s:

- a slot is placed (and reserved) on another pod *before* the session leaves its pod: with no room
  anywhere the session simply stays (`Stayed`) and drains as before, nothing lost;
- then the old pod exports the session at its next tick boundary (the blob) and closes the
  session's socket with `hop.HANDED_OVER_CLOSE` after its last frame. While it exports the
  client's frames still go to it and are kept too (`copying`): its answer says how many it read
  into the blob, and the ones after those are held (`holding`) with every later one, so the
  caller's audio is held only from the blob on, for the import and the dial;
- the blob goes to the target pod (import), and only once the old socket has closed (so every
  frame the old pod made has reached the client first) is the target dialled with the import's id
  and the client's own `session.start`; its `session.started` is swallowed (and, by `Relaying`,
  the start's notes behind it) and the held frames follow, in order (`Arrived`): the client sees no
  event at all;
- placement's retry policy is `placing.Placing`'s (two placements, a failed pod excluded): a
  target that refuses the import, cannot be dialled or answers busy is excluded and the blob
  offered to one more;
- before the export, any failure leaves the session where it is (`Stayed`); after it, the session
  exists only as the blob, and a move that cannot finish strands it (`Stranded`: lost).

A session whose pod died is *resumed* the same way (Part 3): the gateway kept the pod's checkpoints
of it (`hop.CHECKPOINT`), so the machine starts with that record as its blob and no pod to export
from: place, offer the record (`hop.RESUME_PATH`), dial, switch; the client's frames are held from
the start. The caller hears a short silence, not an error; only a record no pod takes loses it.

Reservations: a target's slot is given back by whoever reports the target refused the import
(`Relaying.imported`: no breaker, a blob that does not fit a pod, as during a rollout between
versions, is no fault of the pod) or unreachable (the shell, with the breaker, as for any start);
`Stayed` and `Stranded` name the one slot the machine abandons otherwise. Once `DONE`, every input
answers `Wait`: a placement that lands after the move ended is given back (`Relaying.placed`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from liveplex.gateway import placing
from liveplex.gptlive import errors
from liveplex.placement import Busy, Placed


@dataclass(frozen=True, slots=True)
class Export:
    """Ask the old pod for the session's blob; answer with `exported`. Hold the client's frames
    from now on."""


@dataclass(frozen=True, slots=True)
class Import:
    """Offer the blob to `placed`; answer with `imported`."""

    placed: Placed
    blob: bytes


@dataclass(frozen=True, slots=True)
class DialTarget:
    """Dial `placed` with the import's id and send the client's `session.start`; answer with
    `answered` (the target's first message) or `unreachable`."""

    placed: Placed
    import_id: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to do until the next input."""


@dataclass(frozen=True, slots=True)
class Arrived:
    """The target runs the session: relay from its socket, send it the held frames, in order."""

    placed: Placed


@dataclass(frozen=True, slots=True)
class Stayed:
    """No move: the session goes on on its pod. `unreserve`: a target slot to give back."""

    unreserve: Placed | None = None


@dataclass(frozen=True, slots=True)
class Stranded:
    """The session is lost: exported and no pod took it (`why`, for the client's error), or ended
    with its pod before it could leave (None: told as the pod's socket ended)."""

    why: str | None
    unreserve: Placed | None = None


Command = placing.Place | placing.Recheck | Export | Import | DialTarget | Wait | Arrived | Stayed | Stranded


class Phase(enum.Enum):
    PLACING = "placing"
    """Finding a target; the session runs on its pod as ever."""
    EXPORTING = "exporting"
    IMPORTING = "importing"
    DIALLING = "dialling"
    DONE = "done"


NO_POD_TOOK_IT = "no engine could take over this session when its engine stopped"
"""`Stranded.why` for a session exported (or resumed) that no pod took: what the client hears."""


class Moving:
    """One session's move; see the module docstring. `pod`: where it runs now (or ran, for a
    resume); `tripped`: pods this gateway's breakers exclude; `record`: a resume's record (the pod
    is gone: nothing to export, nothing to wait for)."""

    def __init__(self, pod: str, tripped: frozenset[str], record: bytes | None = None) -> None:
        self._placing = placing.Placing(tripped | {pod})
        self.phase = Phase.PLACING
        self.resuming = record is not None
        self._target: Placed | None = None
        self._blob = record
        self._import_id: str | None = None
        self._old_closed = self.resuming

    @property
    def holding(self) -> bool:
        """Whether the client's frames are held, not forwarded: once the blob is out (or all along
        for a resume), until the switch."""
        if self.phase is Phase.DONE:
            return False
        return self.resuming or self.phase in (Phase.IMPORTING, Phase.DIALLING)

    @property
    def copying(self) -> bool:
        """Whether the client's frames are forwarded *and* kept: while the old pod exports, it
        reads them into the session until it takes the session out, and says how many it read;
        the rest are held for the next pod."""
        return self.phase is Phase.EXPORTING

    def begin(self) -> Command:
        return self._placing.begin()

    def placed(self, result: Placed | Busy | errors.ProtocolError) -> Command:
        """Placement answered (as `placing.Placing.placed` takes it)."""
        if self.phase not in (Phase.PLACING, Phase.IMPORTING):
            return Wait()
        return self._follow(self._placing.placed(result))

    def rechecked(self) -> Command:
        if self.phase not in (Phase.PLACING, Phase.IMPORTING):
            return Wait()
        return self._follow(self._placing.rechecked())

    def exported(self, blob: bytes | None) -> Command:
        """The old pod's answer: the blob, or None (the session was not running there, or the
        pod refused): then nothing moved."""
        target = self._target
        if self.phase is not Phase.EXPORTING or target is None:
            return Wait()
        if blob is None:
            self.phase = Phase.DONE
            return Stayed(unreserve=target)
        self._blob = blob
        self.phase = Phase.IMPORTING
        return Import(target, blob)

    def imported(self, placed: Placed, import_id: str | None) -> Command:
        """The target held the blob under `import_id`, or refused it (None: it does not fit that
        pod, or the pod is full or draining): then another pod is tried."""
        if self.phase is not Phase.IMPORTING or placed != self._target:
            return Wait()
        if import_id is None:
            return self._follow(self._placing.unreachable(placed))
        self._import_id = import_id
        self.phase = Phase.DIALLING
        return self._dial()

    def old_closed(self, handed_over: bool) -> Command:
        """The old pod's socket closed; `handed_over`: with `hop.HANDED_OVER_CLOSE`, after its last
        frame. Before the export answered, any other end (or a hand-over nobody asked for) means
        the session died with its pod; after it, the blob is the session and only the order of
        frames waited on this."""
        self._old_closed = True
        if self.resuming:
            return Wait()
        if self.phase is Phase.PLACING or (self.phase is Phase.EXPORTING and not handed_over):
            self.phase = Phase.DONE
            return Stranded(None, unreserve=self._target)
        return self._dial() if self.phase is Phase.DIALLING else Wait()

    def answered(self, placed: Placed, text: str) -> Command:
        """The target's first message after the forwarded start."""
        if self.phase is not Phase.DIALLING:
            return Wait()
        return self._follow(self._placing.answered(placed, text))

    def unreachable(self, placed: Placed) -> Command:
        """The target could not be dialled, or did not answer the start in time."""
        if self.phase is not Phase.DIALLING:
            return Wait()
        return self._follow(self._placing.unreachable(placed))

    # --- internals -----------------------------------------------------------------------------------

    def _dial(self) -> Command:
        """Dial once both the import is held and the old socket has closed (its frames relayed)."""
        if not self._old_closed or self._target is None or self._import_id is None:
            return Wait()
        return DialTarget(self._target, self._import_id)

    def _follow(self, command: placing.Command) -> Command:
        """Placing's next step, in a move's terms."""
        if isinstance(command, placing.Place | placing.Recheck):
            if self._blob is not None:
                self.phase = Phase.IMPORTING
            return command
        if isinstance(command, placing.Dial):
            self._target = command.placed
            self._import_id = None
            if self._blob is None:
                self.phase = Phase.EXPORTING
                return Export()
            self.phase = Phase.IMPORTING
            return Import(command.placed, self._blob)
        if isinstance(command, placing.Start):
            self.phase = Phase.DONE
            return Arrived(command.placed)
        self.phase = Phase.DONE
        return Stayed() if self._blob is None else Stranded(NO_POD_TOOK_IT)
