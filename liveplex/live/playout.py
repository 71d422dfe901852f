"""`Playout`: how long a caller's frame waits for its tick, adapted to the jitter it shows.

A fixed prebuffer pays its worst case on every call and never gives back what a stall piled up.
This policy measures each frame's wait instead: from the arrival of the bytes that completed it to
the due time of the tick that plays it. Over a block of ticks the least wait says how early even the
latest frame was; what exceeds the safety margin by a whole step is given back by moving the
session to an earlier tick group (`step` apart within the period). Moves of up to G - 1 steps a
tick lose nothing: the session runs again sooner, so its model hears the frames that piled up
faster than real time (the caller hears the replies early, which its player absorbs); more than a
period is given back that way over successive ticks. With one group there is no sooner turn, so a
whole period is given back by dropping a buffered frame. The other way round, a frame not whole at
its turn makes the session take the next group's turn instead, up to G - 1 steps: the delay grows by
what the lateness needs and the model hears no silence (the caller's reply comes that much later
once). Only a frame later than that, or any late frame with one group, is an underrun: the session
goes back to the turn it waited from, and the margin grows; calm lowers it again. This is WebRTC
NetEq's shape (target delay from measured arrival jitter, accelerate when the buffer runs above it,
stretch when a packet is late) at the granularity a shared tick allows.

Pure: times arrive as arguments (`live/jitter.py` records arrivals, the drive loop gives due times).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass

MS = 1_000_000


@dataclass(frozen=True, slots=True)
class Playout:
    """The adaptive policy's settings; one per engine, shared by its sessions."""

    period_ns: int = 80 * MS
    """The tick period: one frame."""
    groups: int = 1
    """Tick groups the engine runs within a period; a session moves between them in `step_ns`."""
    margin_ns: int = 4 * MS
    """The least wait kept above the latest frame seen: the tick's own start jitter."""
    underrun_ns: int = 10 * MS
    """Added to the margin at each underrun (Kyutai's web client adds 5 ms per underrun; a tick
    group is 20 ms, so 5 ms took four underruns, each 80 ms of silence to the model, to move a
    session one group back)."""
    max_margin_ns: int = 100 * MS
    calm_ticks: int = 50
    """Ticks (4 s) without an underrun after which the margin comes down one `decay_ns`."""
    decay_ns: int = 5 * MS
    block_ticks: int = 12
    """Waits are judged over blocks of this many played ticks (about 1 s): long enough to see the
    link's jitter, short enough that what a stall piles up is given back within two blocks."""
    first_block_ticks: int = 3
    """A session's first block is this short: its first frames wait wherever its caller's phase
    fell against its group's turn, up to a whole period, and a block of 12 kept that for the
    first second (issue 44: 12 frames at 75-78 ms, 2.4 % of a 20 s call's frames, were a tiny
    PersonaPlex pod's whole p99). A link's jitter the short block did not see is caught as any
    later: the frame takes the next group's turn, and the blocks after judge again."""
    history_blocks: int = 8
    """What is given back is what the least wait of the last this many blocks allows (about 4 s):
    a bursty link's late frames come now and then, and one calm block must not undo what they
    showed. An underrun clears it, so what a stall piled up goes as soon as the blocks after it say."""

    def __post_init__(self) -> None:
        if self.groups < 1 or self.period_ns % self.groups:
            raise ValueError(f"playout groups must be >= 1 and divide the period, got {self.groups}")
        if min(self.margin_ns, self.underrun_ns, self.decay_ns) < 0 or self.max_margin_ns < self.margin_ns:
            raise ValueError("playout margins must be >= 0 ns and max_margin_ns >= margin_ns")
        if min(self.calm_ticks, self.block_ticks, self.first_block_ticks, self.history_blocks) < 1:
            raise ValueError("playout calm_ticks, block_ticks, first_block_ticks and history_blocks must be >= 1")

    @property
    def step_ns(self) -> int:
        """How far apart the tick groups are: the finest shift a session can make."""
        return self.period_ns // self.groups


class Adapt:
    """One session's side of `Playout`: its margin and the least waits of its recent blocks."""

    __slots__ = ("policy", "margin_ns", "deferred", "_low", "_count", "_calm", "_owed", "_lows", "_late", "_dry",
                 "_waited", "_block")

    def __init__(self, policy: Playout) -> None:
        self.policy = policy
        self.margin_ns = policy.margin_ns
        self._low: int | None = None
        self._count = 0
        self._calm = 0
        self._owed = 0
        """Steps decided and not yet taken: a session catching up moves G - 1 steps a tick."""
        self._lows: deque[int] = deque(maxlen=policy.history_blocks)
        """The least wait of each recent block, as it would be on today's schedule."""
        self._late = False
        """The block after an underrun holds the late frames themselves (their short waits are
        the lateness the underrun already paid for): it is not kept."""
        self._dry = 0
        """Silent turns since the underrun, counting its own."""
        self.deferred = 0
        """Steps the session took a later turn (`later`) rather than hear silence."""
        self._waited = 0
        """Steps waited in a row for the frame due now."""
        self._block = policy.first_block_ticks
        """The current block's length: the first one's, then `block_ticks`."""

    def played(self, wait_ns: int | None) -> int:
        """A frame played after waiting `wait_ns` (None: its arrival is unknown, e.g. carried over
        from another pod). Returns the steps the session should move earlier (0 mostly): with
        G groups at most G - 1, taken by a move; with one group whole periods, which the buffer
        drops."""
        p = self.policy
        self._waited = 0
        self._calm += 1
        if self._calm >= p.calm_ticks:
            self._calm = 0
            self.margin_ns = max(p.margin_ns, self.margin_ns - p.decay_ns)
        if self._dry:
            if self._dry == 1 and wait_ns is not None and 0 < p.period_ns - wait_ns:
                # The frame that missed one turn, in time for the next: it came `period - wait`
                # late, jitter the margin must cover from now on. One that missed more turns
                # was a stall, which no margin short of the stall itself covers.
                self.margin_ns = min(p.max_margin_ns, max(self.margin_ns, p.period_ns - wait_ns + p.margin_ns))
            self._dry = 0
        if self._owed:
            return self._take(p)
        if wait_ns is not None:
            self._low = wait_ns if self._low is None else min(self._low, wait_ns)
        self._count += 1
        if self._count < self._block:
            return 0
        low, self._low, self._count, self._block = self._low, None, 0, p.block_ticks
        if low is None or self._late:
            self._late = False
            return 0
        self._lows.append(low)
        low = min(self._lows)
        if low < self.margin_ns + p.step_ns:
            return 0
        self._owed = (low - self.margin_ns) // p.step_ns
        return self._take(p)

    def _take(self, p: Playout) -> int:
        """This tick's share of the steps owed: all of them with one group (frames to drop),
        else at most G - 1 (a sooner turn, nothing lost). The block starts over when they are taken."""
        give = self._owed if p.groups == 1 else min(self._owed, p.groups - 1)
        self._owed -= give
        self._low, self._count = None, 0
        earlier = give * p.step_ns  # the blocks seen would have waited that much less
        self._lows = deque((low - earlier for low in self._lows), maxlen=p.history_blocks)
        return give

    def later(self) -> bool:
        """The frame due now is not whole: True when the session should take the next group's turn
        for it (then it moves one step later for good, and what the blocks saw would have waited
        a step longer), False when it must underrun (one group, or G - 1 steps waited already)."""
        p = self.policy
        if self._waited >= p.groups - 1:
            return False
        self._waited += 1
        self.deferred += 1
        self._owed = 0  # a give-back under way is what just proved too eager
        if self._low is not None:
            self._low += p.step_ns
        self._lows = deque((low + p.step_ns for low in self._lows), maxlen=p.history_blocks)
        return True

    def regroup(self, groups: int) -> None:
        """The engine runs `groups` groups from now on (issue 44): its steps are that size; a
        give-back or a wait under way was counted in the old steps, so it is dropped."""
        self.policy = dataclasses.replace(self.policy, groups=groups)
        self._owed = self._waited = 0

    def underrun(self) -> int:
        """A frame missed its tick: more margin, and the blocks start over. Returns the steps the
        session waited for it in vain (`later`): it goes back that far, since the frame comes after
        a refill, not at the phase the wait reached, and the turn it left is the soonest one."""
        p = self.policy
        self.margin_ns = min(p.max_margin_ns, self.margin_ns + p.underrun_ns)
        self._low, self._count, self._calm, self._owed = None, 0, 0, 0
        self._lows.clear()
        self._late = True
        self._dry = 1
        waited, self._waited = self._waited, 0
        return waited

    def dry(self) -> None:
        """Another silent turn, waiting for the buffer to refill."""
        if self._dry:
            self._dry += 1
