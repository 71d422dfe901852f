"""`UpstreamLeg`: one client session placed on a pod and relayed to it verbatim (platform §7.3-§7.9).

One task per session until it starts: the shell of `placing.Placing`, which decides every retry:
it runs placement (through `GatewayBackend.place`), dials the pod with the session id
(`upstream.Upstream`), forwards the client's `session.start` text and feeds the pod's answer back.
After that there is no task: frames move by callbacks in both directions. `session.started` hands the client
socket over (`Peer.handed_off`): from then on frames are copied both ways without JSON
parsing the audio (upstream frames starting with `events.AUDIO_DELTA_PREFIX` are relayed as they are; only the
rare others are parsed to learn the session's end). The pod's `session.closed` ends the client's
socket with the pod's own close code, once the pod's close frame arrives. The upstream ending any
other way (`upstream.Ending`: the pod vanished, went silent, broke the stream, or a message over
the size limit was refused) is
`server_error` + `session.closed` `connection_lost` + 1011 to the client; only the pod's own faults
trip its breaker, never what a client made it say.

A draining pod's `hop.MOVE_REQUESTED` (never relayed) moves the session to another pod: the shell
of `moving.Moving`, one input at a time from the callbacks and the I/O it starts (placement, the
pods' handover routes, the dial), until the session `Switch`es to its new upstream, `Stay`s, or is
lost. The client's frames follow the session in order: those the old pod read before it let the
session go are in its blob, the rest are held and sent to the new pod.

The pod's `hop.CHECKPOINT`s of the session (never relayed, never parsed) are kept, up to
`MAX_RECORD_BYTES`; when the pod is lost mid-session, the same machine *resumes* the session on
another pod from them, and the client hears a short silence instead of `connection_lost`.
"""

from __future__ import annotations

import asyncio
import binascii
import logging
import time
from collections import deque
from collections.abc import Coroutine, Mapping
from typing import Any, Protocol

from liveplex.gateway import moving, placing, upstream
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive import connection, errors, events
from liveplex.gptlive.server import backend, hop
from liveplex.placement import Busy, Placed

logger = logging.getLogger(__name__)

MAX_UPSTREAM_BUFFER_BYTES = 1 << 20
"""Client audio held for a pod that does not read (≈20 s of 24 kHz PCM in base64) before the
session is dropped."""
LOST_BECAUSE: dict[upstream.Ending, str] = {
    upstream.Ending.LOST: "the engine serving this session went away",
    upstream.Ending.VIOLATION: "the engine serving this session broke the protocol",
    upstream.Ending.SILENT: "the engine serving this session stopped responding",
    upstream.Ending.TOO_LARGE: "the engine's answer to an event of this session was too large to relay",
}
"""What the client's `server_error` says, by how the upstream ended."""
NOT_TAKEN = "not_taken"
"""`sessions_lost`'s reason for a session exported off a draining pod that no pod took."""
MAX_RECORD_BYTES = 768 << 10
"""A session's kept checkpoints (decoded bytes) beyond which it is no longer resumable: a
PersonaPlex call writes about 71 KB a minute and its pod stops at 6,000 frames (~570 KB,
docs/continuity.md), so this bounds what a gateway holds per session whatever a pod sends."""


class Placer(Protocol):
    """What a leg needs from the gateway that runs it (`backend.GatewayBackend`): placement with
    its fallbacks, the breakers, the counters, and how to dial."""

    stats: GatewayStats
    upstream_headers: Mapping[str, str]
    upstream_tls: upstream.Tls | None
    move_turns: asyncio.Semaphore

    @property
    def connect_timeout_s(self) -> float: ...
    @property
    def start_timeout_s(self) -> float: ...
    def tripped(self) -> frozenset[str]: ...
    async def place(self, pool: str, session_id: str, exclude: set[str]) -> Placed | Busy | errors.ProtocolError: ...
    async def unreachable(self, placed: Placed, session_id: str) -> None: ...
    async def unreserve(self, placed: Placed, session_id: str) -> None: ...
    async def export(self, placed: Placed, session_id: str, after: int) -> tuple[bytes, int] | None: ...
    async def import_blob(self, placed: Placed, blob: bytes, path: str) -> str | None: ...
    def moved(self, result: str) -> None: ...
    def lost(self, pod: str) -> None: ...
    def placed(self, pool: str, started_ns: int, retried: bool) -> None: ...
    def refused(self, pool: str, busy: Busy) -> None: ...
    def relaying(self, pool: str, delta: int) -> None: ...
    def leg_done(self, leg: UpstreamLeg) -> None: ...


class UpstreamLeg:
    """See the module docstring; the pump calls `forward` and `release`."""

    def __init__(self, owner: Placer, start: connection.Start, peer: backend.Peer,
                 pool: str) -> None:
        self._owner = owner
        self._start = start
        self._peer = peer
        self._pool = pool
        self._frames = 0
        self._closed_reason: str | None = None
        """The reason of the pod's `session.closed`, relayed; the client's socket closes once the
        pod's does, with its code."""
        self._relaying = False
        self._placed: Placed | None = None
        """The pod the session runs on."""
        self._up: upstream.Upstream | None = None
        self._inbox: list[str | bytes] = []
        self._arrived = asyncio.Event()
        self._done = False
        self._moving: moving.Moving | None = None
        self._target_up: upstream.Upstream | None = None
        """The dialled target of a move, until it answers."""
        self._held: deque[str | bytes] = deque()
        self._held_bytes = 0
        """Client frames waiting for a moving session's next pod (while the old pod exports, the
        ones forwarded to it too: `moving.Moving.copying`)."""
        self._record: bytearray | None = bytearray()
        """The pod's checkpoints of the session, decoded and concatenated in order (the resume
        record); None once over `MAX_RECORD_BYTES` or unreadable (the session is then not
        resumable)."""
        self._io: set[asyncio.Task[None]] = set()
        self._turn = False
        """This session holds one of the gateway's `move_turns` (its move is under way)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    # --- the pump's side ----------------------------------------------------------------------------

    def append(self, pcm: bytes) -> None:
        raise RuntimeError("a relayed session's audio is forwarded as the client sent it")

    def forward(self, data: str | bytes) -> None:
        up = self._up
        if up is None or self._done:
            return
        machine = self._moving
        if machine is not None and machine.holding:
            self._hold(data)
            return
        if up.write_buffer_bytes > MAX_UPSTREAM_BUFFER_BYTES:
            logger.warning("upstream too slow; dropping the session",
                           extra={"pod": self._placed.pod if self._placed else None})
            up.abort(upstream.Ending.SILENT)  # a pod that does not read is as stuck as one that does not write
            self._lost(upstream.Ending.SILENT)
            return
        up.send(data)
        self._owner.stats.frames_up += 1
        if machine is not None and machine.copying:
            self._hold(data)

    def _hold(self, data: str | bytes) -> None:
        """Keep a client frame for a moving session's next pod, within the buffer's bound."""
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes > MAX_UPSTREAM_BUFFER_BYTES:
            self._lost_in_move("the session's audio outgrew its buffer while it moved between engines")

    def hangup(self) -> None:
        """Never asked: a relayed session's `session.close` is forwarded to the pod."""

    def release(self) -> None:
        if not self._task.done():
            self._task.cancel()
        self._finish()

    # --- the watchdog's side -------------------------------------------------------------------------

    @property
    def received(self) -> int | None:
        """Messages from the pod while relaying (`watchdog.Watched`); none while the session moves
        (its quiet is the move's, and each step of the move has its own deadline)."""
        up = self._up
        if up is None or not self._relaying or self._done or self._moving is not None:
            return None
        return up.received

    def silenced(self) -> None:
        """The pod said nothing for the read deadline: drop it as lost."""
        if self._up is not None:
            logger.warning("upstream silent; dropping the session",
                           extra={"pod": self._placed.pod if self._placed else None})
            self._up.abort(upstream.Ending.SILENT)

    # --- placing and starting (a task) --------------------------------------------------------------

    async def _run(self) -> None:
        try:
            up = await self._place_and_start()
        except asyncio.CancelledError:
            if self._up is not None:
                self._up.abort()
            raise
        except Exception:
            logger.error("placement failed", exc_info=True)
            if not self._done:
                self._peer.refuse(errors.server_error("placement failed"))
            return
        if up is None:
            self._owner.leg_done(self)
            return
        self._owner.relaying(self._pool, +1)
        self._relaying = True
        self._adopt(up)

    def _adopt(self, up: upstream.Upstream) -> None:
        """Relay from `up` (after its `session.started`, which `_first` read)."""
        self._up = up
        up.lost.add_done_callback(lambda _: self._gone(up))
        up.on_message = self._message
        backlog, self._inbox = self._inbox[1:], []
        for message in backlog:  # what the pod sent right behind `session.started`
            self._message(message)

    async def _place_and_start(self) -> upstream.Upstream | None:
        """Drive `placing.Placing` (the retry policy) through placement, the dial and the pod's
        first answer; on failure tell the client and return None."""
        peer, start, owner = self._peer, self._start, self._owner
        started_ns = time.monotonic_ns()
        machine = placing.Placing(owner.tripped())
        command = machine.begin()
        while True:
            if isinstance(command, placing.Place):
                command = machine.placed(await owner.place(self._pool, start.resource.id, set(command.exclude)))
            elif isinstance(command, placing.Recheck):
                await asyncio.sleep(command.delay_s)
                command = machine.rechecked()
            elif isinstance(command, placing.Dial):
                ws = await self._dial(command.placed)
                first = None if ws is None else await self._first(ws, command.placed)
                if ws is None or first is None:
                    command = machine.unreachable(command.placed)
                    continue
                command = machine.answered(command.placed, first if isinstance(first, str)
                                           else first.decode(errors="replace"))
                if not isinstance(command, placing.Start):
                    ws.close()
                else:
                    self._up = ws  # before the hand-off: the pump replays the client's parked frames to us
            elif isinstance(command, placing.Start):
                owner.placed(self._pool, started_ns, retried=command.retried)
                self._placed = command.placed
                peer.relay(command.text, False)
                peer.handed_off(command.expires_at)
                return self._up
            else:
                if command.busy is not None:
                    owner.refused(self._pool, command.busy)
                if command.relay is not None:
                    peer.relay(command.relay, False)
                peer.refuse(command.error)
                return None

    async def _dial(self, placed: Placed, import_id: str | None = None) -> upstream.Upstream | None:
        """Connect to the pod within the budget (continuing the import `import_id` when given); a
        failure gives back the reservation and trips the pod's breaker."""
        headers = {**self._owner.upstream_headers, hop.SESSION_ID_HEADER: self._start.resource.id,
                   hop.POOL_HEADER: self._pool}
        if import_id is not None:
            headers[hop.IMPORT_HEADER] = import_id
        try:
            up = await upstream.connect(placed.addr, headers, self._owner.connect_timeout_s,
                                        self._owner.upstream_tls)
        except (OSError, TimeoutError, ValueError, upstream.UpstreamError):
            await self._owner.unreachable(placed, self._start.resource.id)
            return None
        up.on_message = self._queued
        return up

    def _queued(self, message: str | bytes) -> None:
        """Until the session starts, the pod's messages wait for `_first`."""
        self._inbox.append(message)
        self._arrived.set()

    async def _first(self, up: upstream.Upstream, placed: Placed) -> str | bytes | None:
        """Forward the start and read the pod's answer; None if the pod hung up first."""
        self._inbox, self._arrived = [], asyncio.Event()
        up.send(self._start.text)
        arrived = asyncio.ensure_future(self._arrived.wait())
        try:
            await asyncio.wait({arrived, up.lost}, timeout=self._owner.start_timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            arrived.cancel()
        if not self._inbox:
            up.abort()
            await self._owner.unreachable(placed, self._start.resource.id)
            return None
        return self._inbox[0]

    # --- relaying (callbacks) -----------------------------------------------------------------------

    def _message(self, message: str | bytes) -> None:
        if self._done:
            return
        if type(message) is str and message.startswith(events.AUDIO_DELTA_PREFIX):
            self._frames += 1
            self._owner.stats.frames_down += 1
            self._peer.relay(message, True)
            return
        if type(message) is str and message.startswith(hop.CHECKPOINT_PREFIX):
            self._kept(message[len(hop.CHECKPOINT_PREFIX):-2])
            return
        text = message if isinstance(message, str) else message.decode(errors="replace")
        kind, body = placing.event_kind(text)
        if kind == hop.MOVE_REQUESTED:
            self._move()
            return
        self._peer.relay(text, False)
        if kind == events.SERVER_TYPES[events.SessionClosed]:
            self._closed_reason = str(body.get("reason"))

    def _gone(self, up: upstream.Upstream) -> None:
        """The pod's transport closed: after its `session.closed` the client's socket closes as
        the pod's did; else the session is lost, and why decides whether the pod is to blame. A
        moving session's old socket is the move's to judge."""
        if self._done or up is not self._up:
            return
        if self._moving is not None and self._closed_reason is None:
            handed_over = up.ending is upstream.Ending.CLOSED and up.close_code == hop.HANDED_OVER_CLOSE
            self._step(self._moving.old_closed(handed_over))
            return
        if self._closed_reason is None and self._resume(up.ending or upstream.Ending.LOST):
            return
        if self._closed_reason is not None:
            peer = self._peer
            code = up.close_code if up.ending is upstream.Ending.CLOSED and up.close_code else connection.NORMAL
            peer.relay_ended(self._closed_reason, self._frames, code)
            self._finish()
            return
        # a close handshake that did not end the session is the pod breaking the protocol
        ending = up.ending or upstream.Ending.LOST
        self._lost(upstream.Ending.VIOLATION if ending is upstream.Ending.CLOSED else ending)

    def _lost(self, ending: upstream.Ending) -> None:
        """The session cannot go on (platform §7.8); the pod's breaker trips if the pod failed."""
        self._owner.stats.sessions_lost[ending.value] += 1
        if self._placed is not None and ending.pods_fault:
            self._owner.lost(self._placed.pod)
        self._peer.relay_lost(self._frames, LOST_BECAUSE[ending])
        self._finish()

    def _lost_in_move(self, why: str) -> None:
        """A session between pods that cannot arrive: no pod took its blob, or its held audio
        outgrew the buffer."""
        self._owner.stats.sessions_lost[NOT_TAKEN] += 1
        self._owner.moved("lost")
        self._peer.relay_lost(self._frames, why)
        self._finish()

    # --- moving to another pod (`moving.Moving`'s shell) ---------------------------------------------

    def _move(self) -> None:
        """The pod asked the session to move: start once, for a running session."""
        if self._moving is not None or self._done or self._placed is None or self._closed_reason is not None:
            return
        self._moving = moving.Moving(self._placed.pod, self._owner.tripped())
        self._spawn(self._move_in_turn(self._moving))

    async def _move_in_turn(self, machine: moving.Moving) -> None:
        """Begin the move once the gateway has a turn for it; until then the session goes on
        where it is (its frames forwarded as ever)."""
        await self._owner.move_turns.acquire()
        self._turn = True
        if self._moving is not machine or self._done:  # its pod ended it meanwhile
            self._end_turn()
            return
        self._step(machine.begin())

    def _end_turn(self) -> None:
        if self._turn:
            self._turn = False
            self._owner.move_turns.release()

    def _step(self, command: moving.Command) -> None:
        """Carry out the machine's next command: start its I/O, or end the move."""
        machine = self._moving
        if machine is None or self._done:
            return
        session_id = self._start.resource.id
        if isinstance(command, placing.Place):
            self._spawn(self._move_placed(machine, command.exclude))
        elif isinstance(command, placing.Recheck):
            self._spawn(self._move_rechecked(machine, command.delay_s))
        elif isinstance(command, moving.Export):
            assert self._placed is not None and self._up is not None
            self._spawn(self._move_exported(machine, self._placed, self._up.sent))
        elif isinstance(command, moving.Import):
            self._spawn(self._move_imported(machine, command.placed, command.blob))
        elif isinstance(command, moving.Dial):
            self._spawn(self._move_dialled(machine, command.placed, command.import_id))
        elif isinstance(command, moving.Switch):
            self._switch(command.placed)
        elif isinstance(command, moving.Stay | moving.Lose):
            if command.unreserve is not None:
                self._spawn(self._owner.unreserve(command.unreserve, session_id))
            self._moving = None
            self._end_turn()
            self._held.clear()  # copies of frames the pod read: a move that did not happen holds none
            self._held_bytes = 0
            if isinstance(command, moving.Stay):
                self._owner.moved("stayed")
            elif command.why is None:  # the pod died before the session could leave it
                up = self._up
                ending = (up.ending if up is not None else None) or upstream.Ending.LOST
                if not self._resume(ending):
                    self._owner.moved("lost")
                    self._lost(upstream.Ending.VIOLATION if ending is upstream.Ending.CLOSED else ending)
            else:
                self._lost_in_move(command.why)

    def _spawn(self, io: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(io)
        self._io.add(task)
        task.add_done_callback(self._io.discard)

    async def _move_placed(self, machine: moving.Moving, exclude: frozenset[str]) -> None:
        result = await self._owner.place(self._pool, self._start.resource.id, set(exclude))
        command = machine.placed(result)
        if isinstance(command, moving.Wait) and isinstance(result, Placed):  # the move ended meanwhile
            await self._owner.unreserve(result, self._start.resource.id)
        self._step(command)

    async def _move_rechecked(self, machine: moving.Moving, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._step(machine.rechecked())

    async def _move_exported(self, machine: moving.Moving, source: Placed, after: int) -> None:
        """The blob, once the pod has read the `after` messages sent to it; the frames forwarded
        since, that the pod read into the blob, are no longer the next pod's."""
        got = await self._owner.export(source, self._start.resource.id, after)
        if got is None:
            self._step(machine.exported(None))
            return
        blob, read = got
        if read < after:  # the pod gave up waiting for them (`hop.EXPORT_CATCH_UP_S`)
            logger.warning("frames lost in a move", extra={"pod": source.pod, "frames": after - read})
        for _ in range(min(max(read - after, 0), len(self._held))):
            self._held_bytes -= len(self._held.popleft())
        self._step(machine.exported(blob))

    async def _move_imported(self, machine: moving.Moving, target: Placed, blob: bytes) -> None:
        import_id = await self._owner.import_blob(target, blob, hop.RESUME_PATH if machine.resuming
                                                  else hop.IMPORT_PATH)
        if import_id is None:  # the slot it reserved is not used: given back, the pod not blamed
            await self._owner.unreserve(target, self._start.resource.id)
        self._step(machine.imported(target, import_id))

    async def _move_dialled(self, machine: moving.Moving, target: Placed, import_id: str) -> None:
        up = await self._dial(target, import_id)
        first = None if up is None else await self._first(up, target)
        if up is None or first is None:
            self._step(machine.unreachable(target))
            return
        command = machine.answered(target, first if isinstance(first, str) else first.decode(errors="replace"))
        if isinstance(command, moving.Switch):
            self._target_up = up
        else:
            up.close()
        self._step(command)

    def _switch(self, target: Placed) -> None:
        """The target runs the session: its `session.started` is swallowed (the client saw one),
        the frames held meanwhile go to it in order, and relaying resumes from it."""
        up, self._target_up = self._target_up, None
        assert up is not None and self._moving is not None
        resumed, self._moving = self._moving.resuming, None
        self._end_turn()
        self._placed = target
        self._adopt(up)
        while self._held:
            up.send(self._held.popleft())
            self._owner.stats.frames_up += 1
        self._held_bytes = 0
        self._owner.moved("resumed" if resumed else "moved")

    def _kept(self, data: str) -> None:
        """One checkpoint of the session, kept for a resume while the record is within bounds
        (decoded at once: bytes cost a third less than their base64, and no object each)."""
        record = self._record
        if record is None:
            return
        try:
            record += binascii.a2b_base64(data, strict_mode=True)
        except (binascii.Error, ValueError):
            why = "unreadable"
        else:
            if len(record) <= MAX_RECORD_BYTES:
                return
            why = "over its bound"
        logger.warning(f"session record {why}; it cannot be resumed",
                       extra={"session_id": self._start.resource.id, "bytes": len(record)})
        self._record = None

    def _resume(self, ending: upstream.Ending) -> bool:
        """The pod failed mid-session (it vanished, went silent, or broke the stream, a close that
        did not end the session included): resume the session on another pod from its record, if
        it has one; the pod's breaker trips as for any loss. False: nothing to resume from, or an
        end that is no fault of the pod's (a message too large to relay ends the session)."""
        if ending is upstream.Ending.CLOSED:
            ending = upstream.Ending.VIOLATION
        if not ending.pods_fault or not self._record or self._placed is None or self._done:
            return False
        record = bytes(self._record)
        self._owner.lost(self._placed.pod)
        logger.warning("upstream lost; resuming the session elsewhere",
                       extra={"pod": self._placed.pod, "ending": ending.value, "record_bytes": len(record)})
        self._moving = moving.Moving(self._placed.pod, self._owner.tripped(), record)
        self._step(self._moving.begin())
        return True

    def _finish(self) -> None:
        """Once: close the upstream, stop counting the session."""
        if self._done:
            return
        self._done = True
        for task in list(self._io):
            task.cancel()
        self._end_turn()
        for up in (self._up, self._target_up):
            if up is not None:
                up.close()
        if self._up is not None:
            self._owner.relaying(self._pool, -1)
        self._owner.leg_done(self)
