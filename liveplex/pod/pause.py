"""The idle pause's shell (issue 43, docs/pause.md): one session's caller frames through the
detector (`pod.vad`) into its wake machine (`pod.wake`), and the machine's commands performed on
the engine's channel.

A pause is an export into the pod's memory (`LiveHandle.export(park=True)`: the engine's parked
state, which PersonaPlex keeps as its slot's rows in host memory, the sim as its blob); a wake is
a resume of that state on the same pod (PersonaPlex copies the rows back: no prefill), the
pre-roll fed first. Between the two the session is in no engine: no tick steps it, its caller's frames go
to the detector and the ring, its usage counts paused time (wall clock, in frames), and it still
ends at its wall-clock end (a timer, and the resumed line's `max_frames` shrunk by the time out).
`session.paused` is said once the engine let the session go, `session.resumed` once it runs again
(its `Started`); both reach the socket as outputs in order (`contract.Paused`/`Resumed`).

A call with a wake policy starts out of the engine (the machine's waiting state, an empty blob:
it never ran), billed as paused, and its first wake is the engine's start; it moves as a blob
with no engine state (`waiting_blob`), which its next pod holds waiting.

A paused session moves like a running one (a gateway relays it): its state's blob is what a move carries,
marked with the pause (`mark`: its time out and its ring), so that a draining pod hands it over
and the next pod holds it paused (`Pausing.arrive`), and a wake that finds the pod full asks the
gateway to move it to a pod with a free slot, where it wakes at once (`MOVE_WAIT_S`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from liveplex.continuity import blob as blobs
from liveplex.gptlive.server import hop
from liveplex.live import channel, contract, frames
from liveplex.live.buckets import Buckets
from liveplex.pod import vad, wake

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PauseSettings:
    """A pod's idle pause (`liveplex serve --idle-pause-s`), off when `idle_timeout_s` is 0."""

    idle_timeout_s: int = 0
    vad_threshold: float = 0.5
    wake_reserve: int = 2
    """Engine slots kept free for wakes, one per paused session up to this many (`wake.free_slots`)."""
    max_paused: int = 256
    """Sessions the pod holds paused at most (the host budget, in sessions)."""
    host_budget_bytes: int = 0
    """Host memory the paused sessions' state may hold, bytes (`wake.may_pause`, `wake.most_paused`);
    0: no bound but `max_paused`."""

    @property
    def on(self) -> bool:
        return self.idle_timeout_s > 0

    def policy(self) -> wake.Policy:
        return wake.Policy(self.vad_threshold, self.idle_timeout_s)


@dataclass(slots=True)
class PauseStats:
    """The pod's pauses, for `/live/stats` and `/metrics` (one writer: the event loop)."""

    paused: int = 0
    """Sessions out of the engine, waiting ones included: each holds no engine slot."""
    waiting: int = 0
    """Of `paused`, calls not yet woken (a wake policy's waiting state)."""
    pauses: int = 0
    wakes: int = 0
    refused_wakes: int = 0
    """Wakes that found no free slot (the reserve must keep this at zero)."""
    wake: Buckets = field(default_factory=lambda: Buckets(WAKE_BUCKETS_S))
    """Each wake's latency: the waking frame's arrival to the resumed session's `Started`."""
    parked_bytes: int = 0
    """Bytes of the paused sessions' state held in the pod's memory."""
    leaving: int = 0
    """Pauses decided whose export has not answered yet: counted against the host budget too."""
    park_bytes: int = 0
    """The largest one session's state held so far (0: none yet): what one more pause is counted
    to hold against the host budget (PersonaPlex's parks are all one size; the sim's vary by bytes)."""

    def snapshot(self) -> PauseSnapshot:
        return PauseSnapshot(self.paused, self.waiting, self.pauses, self.wakes, self.refused_wakes,
                             self.parked_bytes, self.wake.copy())


MOVE_WAIT_S = 2.0
"""How long a wake that found the pod full waits for its gateway to move it (`ask_to_move`); past
it no pod had room (the move `Stayed`), and the wake counts as refused."""
MARK = "pod.paused"
"""A moved paused session's blob: the header state key of its pause (`mark`)."""
RING = "pod.ring"
"""...and the array of its ring, [frames, samples] int16."""
WAITING_KIND = "pod.waiting"
"""`blob.Header.kind` of a call that never ran, as a move carries it (`waiting_blob`)."""


@dataclass(frozen=True, slots=True)
class Moved:
    """A paused session's blob as a move carries it (`mark`, `unmark`)."""

    blob: bytes
    """The engine's blob (the mark beside it: engines read their own keys only); empty: a call
    waiting for its first speech, which never ran."""
    out_frames: int
    """Frames of its current pause so far."""
    before_frames: int
    """Frames of its earlier pauses (its usage and its wall-clock end count them)."""
    waking: bool
    """Its caller spoke and no slot was free: it wakes where it lands, `ring` its pre-roll."""
    ring: tuple[bytes, ...]


def waiting_blob(info: contract.LiveInfo, voice: str) -> bytes:
    """A call that never ran as a blob: no engine state, only the header the import route checks
    (the pod's model, window and engine settings, the call's voice), so that it moves like the
    others and its next pod holds it waiting (`unmark` gives it back empty)."""
    return blobs.encode(blobs.Header(WAITING_KIND, info.model, info.context_frames, voice, 0, dict(info.engine)), {})


def mark(moved: Moved) -> bytes:
    """`moved.blob` with its pause beside the engine's keys."""
    got = blobs.decode(moved.blob)
    assert isinstance(got, blobs.Handover), "an engine's own blob decodes"
    state = {**got.header.state, MARK: {"out": moved.out_frames, "before": moved.before_frames,
                                        "waking": moved.waking}}
    ring = np.frombuffer(b"".join(moved.ring), "<i2").reshape(len(moved.ring), frames.FRAME_SAMPLES)
    header = blobs.Header(got.header.kind, got.header.model, got.header.context, got.header.voice,
                          got.header.frames, got.header.engine, state)
    return blobs.encode(header, {**got.arrays, RING: ring})


def unmark(data: bytes) -> Moved | None:
    """The pause a moved blob carries; None: a running session's blob (or not one `mark` made)."""
    got = blobs.decode(data)
    if isinstance(got, blobs.HandoverError):
        return None
    paused = got.header.state.get(MARK)
    ring = got.arrays.get(RING)
    if not isinstance(paused, dict) or ring is None or ring.dtype != np.dtype("<i2") or ring.ndim != 2 \
            or ring.shape[1] != frames.FRAME_SAMPLES or ring.shape[0] > wake.PRE_ROLL_FRAMES:
        return None
    out, before, waking = paused.get("out"), paused.get("before"), paused.get("waking")
    if not (isinstance(out, int) and isinstance(before, int) and out >= 0 and before >= 0
            and isinstance(waking, bool)):
        return None
    return Moved(b"" if got.header.kind == WAITING_KIND else data, out, before, waking,
                 tuple(row.tobytes() for row in ring))


WAKE_BUCKETS_S: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
"""Wake latency bounds around the issue's targets (p50 <= 100 ms, p99 <= 200 ms)."""


@dataclass(frozen=True, slots=True)
class PauseSnapshot:
    """`PauseStats` at one moment, for `/live/stats` and `/metrics` (`stats.PodSnapshot.pause`)."""

    paused: int = 0
    waiting: int = 0
    pauses: int = 0
    wakes: int = 0
    refused_wakes: int = 0
    parked_bytes: int = 0
    wake: Buckets = field(default_factory=lambda: Buckets(WAKE_BUCKETS_S))


class Leg(Protocol):
    """What the shell needs of the session's `backend.EngineLeg`."""

    @property
    def engine_id(self) -> int | None:
        """The session's id in the engine while one holds it."""
        ...

    def feed(self, pcm: bytes) -> None:
        """Caller audio to the engine's session."""

    def attach(self, opened: channel.Opened) -> None:
        """The session runs in the engine again (a wake): its outputs come from `opened`."""

    def detach(self) -> None:
        """The engine let the session go (a pause, or a refused wake)."""

    def deliver(self, outputs: list[contract.Output]) -> None:
        """Outputs the pod made for the session, to its socket."""

    def frames_sent(self) -> int:
        """Audio frames the session's socket has sent."""
        ...

    def beat(self) -> None:
        """The session is out of the engine a while longer: a relaying gateway hears the pod lives
        (`hop.OUT_BEAT`), since no tick sends it audio."""

    def ask_to_move(self) -> None:
        """Ask the gateway relaying the session to move it to another pod (`hop.MOVE_REQUEST`)."""


class Pausing:
    """One session's idle pause; see the module docstring."""

    def __init__(self, leg: Leg, handle: channel.LiveHandle, session: contract.Session, checkpoints: bool,
                 machine: wake.Machine, detector: vad.Detector, stats: PauseStats,
                 may_pause: Callable[[], bool]) -> None:
        self._leg = leg
        self._handle = handle
        self._session = session
        self._checkpoints = checkpoints
        self.machine = machine
        self._detector = detector
        self._stats = stats
        self._may_pause = may_pause
        """Whether the host budget holds one more paused session."""
        self._partial = b""
        self._spoke = False
        """The model spoke since the last caller frame."""
        self._blob: channel.State | None = None
        """Its state while out of the engine: a parked state (a pause), a blob (a move's arrival),
        empty (it never ran)."""
        self._exporting = False
        self._pending_wake: tuple[bytes, ...] | None = None
        """A wake decided before the export's blob came back."""
        self._waking: tuple[channel.Opened, int] | None = None
        """The resumed session and its waking frame's arrival, until its `Started`."""
        self._paused_ns = 0
        self._outside_frames = 0
        """Frames of time spent paused so far, over all pauses."""
        self._expiry: asyncio.TimerHandle | None = None
        self._beats: asyncio.TimerHandle | None = None
        self._waking_pre_roll: tuple[bytes, ...] = ()
        """The pre-roll of the wake in flight (a move carries it when the wake finds no slot)."""
        self._moving: deque[bytes] | None = None
        """A wake found the pod full and its gateway was asked to move it: the caller's latest
        frames, its pre-roll where it lands (the machine is not fed meanwhile)."""
        self._move_wait: asyncio.TimerHandle | None = None
        if machine.phase is wake.Phase.WAITING:  # out of the engine from the start: billed as paused
            self._parked(b"")
            self._stats.waiting += 1

    @property
    def paused(self) -> bool:
        """Out of the engine (paused or waking)."""
        return self._blob is not None or self._exporting

    # --- caller audio ----------------------------------------------------------------------------------

    def append(self, pcm: bytes) -> None:
        """Caller audio (24 kHz s16le): judged frame by frame."""
        data = self._partial + pcm if self._partial else pcm
        whole = len(data) - len(data) % frames.FRAME_BYTES
        for at in range(0, whole, frames.FRAME_BYTES):
            frame = data[at:at + frames.FRAME_BYTES]
            if self._moving is not None:
                self._moving.append(frame)
                continue
            spoke, self._spoke = self._spoke, False
            prob = (self._detector.prob(frame, self.machine.policy.vad_threshold)
                    if self.machine.measures(spoke) else None)
            self._perform(self.machine.frame(frame, prob, spoke))
        self._partial = data[whole:]

    def _perform(self, command: wake.Command | None) -> None:
        if command is None:
            return
        if type(command) is wake.Feed:
            for pcm in command.pcm:
                self._leg.feed(pcm)
        elif type(command) is wake.Pause:
            self._pause()
        else:
            assert type(command) is wake.Wake
            self._wake(command.pre_roll)

    # --- pause -----------------------------------------------------------------------------------------

    def _pause(self) -> None:
        engine_id = self._leg.engine_id
        if engine_id is None or not self._may_pause():
            self._perform(self.machine.stayed())
            return
        self._exporting = True
        self._stats.leaving += 1
        future = self._handle.export(engine_id, park=True)
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(self._exported, f))

    def _exported(self, future: concurrent.futures.Future[channel.State | None]) -> None:
        """The export's answer; its `Closed(HANDED_OVER)` comes through `outputs`."""
        self._exporting = False
        self._stats.leaving -= 1
        blob = future.result()
        if blob is None:  # it ends at the next tick anyway, or the engine stopped
            self._pending_wake = None
            self._perform(self.machine.stayed())
            return
        self._parked(blob)
        self._stats.pauses += 1
        if self._pending_wake is not None:
            pre_roll, self._pending_wake = self._pending_wake, None
            self._wake(pre_roll)

    def _parked(self, blob: channel.State) -> None:
        """The session is out of the engine, `blob` its state (empty: it never ran)."""
        self._blob = blob
        self._paused_ns = time.monotonic_ns()
        self._stats.paused += 1
        self._stats.parked_bytes += _size(blob)
        self._stats.park_bytes = max(self._stats.park_bytes, _size(blob))
        self._arm_expiry()
        if self._checkpoints:  # a gateway relays it, and watches for silence (the first after `Started`)
            self._beats = asyncio.get_running_loop().call_later(hop.OUT_BEAT_S, self._beat)

    def _arm_expiry(self) -> None:
        left = self._handle.info.max_frames - self._leg.frames_sent() - self._outside_frames
        self._expiry = asyncio.get_running_loop().call_later(
            max(0, left) * frames.PERIOD_NS / 1e9, self._expire)

    def _beat(self) -> None:
        self._leg.beat()
        self._beats = asyncio.get_running_loop().call_later(hop.OUT_BEAT_S, self._beat)

    def _expire(self) -> None:
        """The session's time ran out while paused: it ends `expired`, as in the engine."""
        self._end(contract.CloseReason.EXPIRED)

    # --- wake ------------------------------------------------------------------------------------------

    def _wake(self, pre_roll: tuple[bytes, ...]) -> None:
        blob = self._blob
        if blob is None:  # the export is still on its way
            self._pending_wake = pre_roll
            return
        outside = self._outside_frames + self._frames_out()
        opened = (self._handle.resume(self._session, blob, self._checkpoints, outside) if blob != b""
                  else self._handle.start(self._session, self._checkpoints, outside))
        self._waking_pre_roll = pre_roll
        if isinstance(opened, channel.Rejected):
            self._refused()
            return
        self._waking = (opened, time.perf_counter_ns())
        self._leg.attach(opened)
        for pcm in pre_roll:
            self._leg.feed(pcm)

    def _frames_out(self) -> int:
        return (time.monotonic_ns() - self._paused_ns) // frames.PERIOD_NS

    def _refused(self) -> None:
        """The wake found no slot: a relayed session asks its gateway to move it (a pod with a
        free slot wakes it), else, or when no move came in `MOVE_WAIT_S`, the wake is refused."""
        pre_roll = self._waking_pre_roll
        self._waking = None
        self._leg.detach()
        if self._checkpoints and self._move_wait is None and self.movable():
            self._moving = deque(pre_roll, maxlen=self.machine.policy.pre_roll_frames)
            self._move_wait = asyncio.get_running_loop().call_later(MOVE_WAIT_S, self._not_moved)
            logger.info("wake found the pod full: moving", extra={"paused": self._stats.paused})
            self._leg.ask_to_move()
            return
        self._refuse()

    def _not_moved(self) -> None:
        """No move came: the wake is refused here, and the next speech frame tries again (a later
        refusal asks for a move again: a pod may have room by then)."""
        self._moving = self._move_wait = None
        self._refuse()

    def _refuse(self) -> None:
        self._stats.refused_wakes += 1
        logger.warning("wake refused: no free slot", extra={"paused": self._stats.paused})
        self._perform(self.machine.refused())

    def outputs(self, outputs: list[contract.Output]) -> list[contract.Output] | None:
        """The engine's outputs for the session, before the leg delivers them: what to deliver
        instead (the pause's and the wake's own outputs in their place), None for as they are."""
        for o in outputs:
            if type(o) is contract.Text:
                self._spoke = True
        first, last = outputs[0], outputs[-1]
        if self._waking is not None and type(first) is contract.Started:
            return self._woken(outputs)
        if self._waking is not None and type(last) is contract.Closed and last.reason is contract.CloseReason.BUSY:
            self._refused()
            return []
        if type(last) is contract.Closed and last.reason is contract.CloseReason.HANDED_OVER and self.paused:
            self._leg.detach()
            return [*outputs[:-1], contract.Paused()]
        return None

    def _woken(self, outputs: list[contract.Output]) -> list[contract.Output]:
        assert self._waking is not None
        _, woke_ns = self._waking
        out = self._frames_out()
        self._outside_frames += out
        self._stats.wake.observe((time.perf_counter_ns() - woke_ns) / 1e9)
        self._stats.wakes += 1
        self._settle()
        return [contract.Resumed(out), *outputs[1:]]

    def _settle(self) -> None:
        """The session is no longer paused: its blob and timer go."""
        self._waking = None
        if self._blob is not None:
            self._stats.paused -= 1
            if self._blob == b"":
                self._stats.waiting -= 1
            self._stats.parked_bytes -= _size(self._blob)
            self._blob = None
        for timer in (self._expiry, self._beats, self._move_wait):
            if timer is not None:
                timer.cancel()
        self._expiry = self._beats = self._move_wait = None

    # --- moves: a paused session leaves this pod, or arrives from another -------------------------------

    def movable(self) -> bool:
        """Whether the session is out of the engine here, paused or waiting, for a move to carry
        (a wake or a pause in flight is not out yet)."""
        return self._blob is not None and self._waking is None and not self._exporting

    def move_out(self) -> bytes:
        """The session leaves this pod paused or waiting (an export: a drain, or a wake that found
        no slot): its marked blob (a waiting call's `waiting_blob`); it is no longer held here."""
        assert self._blob is not None, "movable"
        waking = self._moving is not None
        ring = tuple(self._moving) if self._moving is not None else self.machine.kept
        blob = (channel.blob_of(self._blob) if self._blob != b""
                else waiting_blob(self._handle.info, self._session.voice))
        moved = Moved(blob, self._frames_out(), self._outside_frames, waking, ring)
        self._moving = None
        self._settle()
        return mark(moved)

    def arrive(self, moved: Moved) -> None:
        """The session continues here paused or waiting, as it left its last pod (`move_out`); its
        usage learns the earlier pauses' time, and a waking one wakes at once with its ring."""
        self._outside_frames = moved.before_frames
        if moved.before_frames:  # an empty delivery would end the session (`Peer.deliver`)
            self._leg.deliver([contract.Resumed(moved.before_frames, woke=False)])
        self._parked(moved.blob)
        if moved.blob == b"":
            self._stats.waiting += 1
        self._paused_ns -= moved.out_frames * frames.PERIOD_NS
        self.machine.arrived(moved.ring, waiting=moved.blob == b"")
        if moved.waking:
            self._wake(moved.ring)

    # --- the end ---------------------------------------------------------------------------------------

    def hangup(self) -> bool:
        """The caller ends the session: True when it is paused here (it ends without the engine)."""
        if self._blob is None or self._waking is not None:
            return False
        asyncio.get_running_loop().call_soon(self._end, contract.CloseReason.HANGUP)
        return True

    def _end(self, reason: contract.CloseReason) -> None:
        if self._blob is None or self._waking is not None:
            return
        out = self._frames_out()
        self._settle()
        self._leg.deliver([contract.Resumed(out, woke=False),
                           contract.Closed(reason, self._leg.frames_sent(), 0, 0)])

    def release(self) -> None:
        """The session is let go (its socket's end): nothing more is done for it."""
        self._pending_wake = None
        self._settle()


def _size(state: channel.State) -> int:
    """The host bytes a paused session's state holds."""
    return len(state) if isinstance(state, bytes) else state.nbytes
