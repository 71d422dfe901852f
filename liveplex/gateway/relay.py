"""`UpstreamLeg`: the shell that places one client session on a pod and relays it (platform §7.3-§7.9).

It owns the I/O and decides nothing: two sans-I/O machines do, each tested on its own.

- **Until the session starts**, one task drives `placing.Placing` (every retry rule): placement
  (through the `Placer`, `backend.GatewayBackend`), the dial with the session id
  (`upstream.Upstream`), the client's `session.start` text forwarded and the pod's first answer
  fed back. `session.started` is relayed and hands the client's socket over (`Peer.handed_off`).
- **From then on** there is no task: frames move by callbacks in both directions, and
  `relaying.Relaying` says what each means. The leg hands it every pod message
  (`upstream_message`), client frame (`client_frame`) and the pod socket's end (`upstream_gone`),
  and performs the commands it answers, in order (`_perform`): relay, forward, end the client's
  socket with the pod's code, lose the session (`server_error` + `connection_lost` + 1011), trip a
  breaker, count. An audio delta and a client frame cost the machine one call that answers a
  constant (`RELAY_FRAME`, `FORWARD`), told by identity: no command object per frame.
- **Moves and resumes** (`hop.MOVE_REQUESTED` from a draining pod; a pod lost with a record of the
  session kept): the machine wraps `moving.Moving`; a move begins once the gateway has a turn for
  it (`move_turns`: `--moves-at-once` moves at a time; resumes do not wait). The leg starts the
  I/O each step asks for (placement, the pods' handover routes, the dial) as a task, and feeds
  its outcome back naming the move it belongs to, until the session `Switch`es to the dialled target (whose socket the
  leg then adopts), stays, or is lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Mapping
from typing import Any, Protocol

from liveplex.gateway import moving, placing, relaying, upstream
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive import connection, errors
from liveplex.gptlive.server import backend, hop
from liveplex.placement import Busy, Placed

logger = logging.getLogger(__name__)


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
    def give_back(self, placed: Placed, session_id: str) -> None: ...
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

    def __init__(self, owner: Placer, start: connection.Start, peer: backend.Peer, pool: str) -> None:
        self._owner = owner
        self._start = start
        self._peer = peer
        self._pool = pool
        self._machine: relaying.Relaying | None = None
        """What the session's frames and its pod's end mean, from its start on."""
        self._up: upstream.Upstream | None = None
        self._inbox: list[str | bytes] = []
        self._arrived = asyncio.Event()
        self._done = False
        self._target_up: upstream.Upstream | None = None
        """The dialled target of a move, until it answers."""
        self._io: set[asyncio.Task[None]] = set()
        self._awaiting_turn = False
        self._turn: moving.Moving | None = None
        """The move that holds one of the gateway's `move_turns`, while it is under way."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    # --- the pump's side ----------------------------------------------------------------------------

    def append(self, pcm: bytes) -> None:
        raise RuntimeError("a relayed session's audio is forwarded as the client sent it")

    def say(self, text: str) -> None:
        raise RuntimeError("a relayed session's commentary is forwarded as the client sent it")

    def forward(self, data: str | bytes) -> None:
        machine, up = self._machine, self._up
        if machine is None or up is None:
            return
        commands = machine.client_frame(data, up.write_buffer_bytes)
        if commands is relaying.FORWARD:
            up.send(data)
            self._owner.stats.frames_up += 1
        elif commands:
            self._perform(commands, data)

    def hangup(self) -> None:
        """Never asked: a relayed session's `session.close` is forwarded to the pod."""

    def release(self) -> None:
        if not self._task.done():
            self._task.cancel()
        self._finish()

    # --- the watchdog's side -------------------------------------------------------------------------

    @property
    def received(self) -> int | None:
        """Messages from the pod while relaying (`watchdog.Watched`); None while the machine says
        its silence means nothing (`relaying.Relaying.watched`)."""
        machine, up = self._machine, self._up
        if machine is None or up is None or not machine.watched:
            return None
        return up.received

    def silenced(self) -> None:
        """The pod said nothing for the read deadline: drop it as lost."""
        if self._up is not None:
            logger.warning("upstream silent; dropping the session", extra={"pod": self._pod})
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
        self._adopt(up)

    def _adopt(self, up: upstream.Upstream) -> None:
        """Relay from `up` (after its `session.started`, which `_first` read). After a move, the
        rest of its answer to the replayed start is the machine's to swallow."""
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
                self._machine = relaying.Relaying(command.placed)
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

    # --- relaying: `relaying.Relaying`'s shell (callbacks) -----------------------------------------

    def _message(self, message: str | bytes) -> None:
        machine = self._machine
        assert machine is not None  # adopted after the start
        commands = machine.upstream_message(message)
        if commands is relaying.RELAY_FRAME:
            self._owner.stats.frames_down += 1
            self._peer.relay(message, True)  # type: ignore[arg-type]  # an audio delta is text
        elif commands:
            self._perform(commands)

    def _gone(self, up: upstream.Upstream) -> None:
        """The pod's transport closed (a socket the session already left means nothing)."""
        machine = self._machine
        assert machine is not None  # adopted after the start
        if self._done or up is not self._up:
            return
        self._perform(machine.upstream_gone(up.ending, up.close_code, self._owner.tripped()))

    def _perform(self, commands: relaying.Commands, frame: str | bytes = b"") -> None:
        """Carry out the machine's commands, in order; `frame`: the client's, for `Forward`."""
        machine, owner = self._machine, self._owner
        assert machine is not None
        for command in commands:
            if self._done:
                return
            if isinstance(command, relaying.Relay):
                self._peer.relay(command.text, False)
            elif isinstance(command, relaying.Forward):
                assert self._up is not None
                self._up.send(frame)
                owner.stats.frames_up += 1
            elif isinstance(command, relaying.Forget):
                logger.warning(f"session record {command.why}; it cannot be resumed",
                               extra={"session_id": self._start.resource.id, "bytes": command.record_bytes})
            elif isinstance(command, relaying.StartMove):
                if not self._awaiting_turn and self._turn is None:
                    self._awaiting_turn = True
                    self._spawn(self._move_in_turn(machine))
            elif isinstance(command, relaying.Abort):
                assert self._up is not None
                logger.warning("upstream too slow; dropping the session", extra={"pod": self._pod})
                self._up.abort(upstream.Ending.SILENT)
            elif isinstance(command, relaying.Blame):
                owner.lost(command.pod)
            elif isinstance(command, relaying.Resuming):
                logger.warning("upstream lost; resuming the session elsewhere", extra={
                    "pod": command.pod, "ending": command.ending.value, "record_bytes": command.record_bytes})
            elif isinstance(command, relaying.Unreserve):
                owner.give_back(command.placed, self._start.resource.id)
            elif isinstance(command, relaying.Switch):
                self._switch(command.held)
            elif isinstance(command, relaying.Moved):
                owner.moved(command.result)
            elif isinstance(command, relaying.EndClient):
                self._peer.relay_ended(command.reason, command.code)
                self._finish()
            elif isinstance(command, relaying.Lose):
                owner.stats.sessions_lost[command.reason] += 1
                self._peer.relay_lost(command.why)
                self._finish()
            else:
                self._move_io(machine, command)
        if self._turn is not None and machine.moving is not self._turn:  # the move is over
            self._end_turn()

    async def _move_in_turn(self, machine: relaying.Relaying) -> None:
        """Start the move a draining pod asked for once the gateway has a turn for it
        (`GatewaySettings.moves_at_once`); until then the session goes on where it is."""
        await self._owner.move_turns.acquire()
        self._awaiting_turn = False
        commands = machine.move(self._owner.tripped())
        if not commands:  # nothing to move any more (ended, closing, or resuming meanwhile)
            self._owner.move_turns.release()
            return
        self._turn = machine.moving
        self._perform(commands)

    def _end_turn(self) -> None:
        if self._turn is not None:
            self._turn = None
            self._owner.move_turns.release()

    # --- moving to another pod: the I/O of `moving.Moving`'s steps (tasks) ----------------------------

    def _move_io(self, machine: relaying.Relaying, command: relaying.Command) -> None:
        """Start the I/O a move's step asks for; its outcome goes back to `machine`, naming the
        move it answers for."""
        move = machine.moving
        assert move is not None
        if isinstance(command, placing.Place):
            self._spawn(self._move_placed(machine, move, command.exclude))
        elif isinstance(command, placing.Recheck):
            self._spawn(self._move_rechecked(machine, move, command.delay_s))
        elif isinstance(command, moving.Export):
            assert self._up is not None
            self._spawn(self._move_exported(machine, move, machine.serving, self._up.sent))
        elif isinstance(command, moving.Import):
            self._spawn(self._move_imported(machine, move, command.placed, command.blob))
        elif isinstance(command, moving.Dial):
            self._spawn(self._move_dialled(machine, move, command.placed, command.import_id))
        else:
            raise AssertionError(f"unknown command {command!r}")

    def _spawn(self, io: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(io)
        self._io.add(task)
        task.add_done_callback(self._io.discard)

    async def _move_placed(self, machine: relaying.Relaying, move: moving.Moving, exclude: frozenset[str]) -> None:
        self._perform(machine.placed(move, await self._owner.place(self._pool, self._start.resource.id,
                                                                   set(exclude))))

    async def _move_rechecked(self, machine: relaying.Relaying, move: moving.Moving, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._perform(machine.rechecked(move))

    async def _move_exported(self, machine: relaying.Relaying, move: moving.Moving, source: Placed,
                             after: int) -> None:
        """The blob, once the pod has read the `after` messages sent to it, and how many it read."""
        got = await self._owner.export(source, self._start.resource.id, after)
        blob, read = (None, after) if got is None else got
        if read < after:  # the pod gave up waiting for them (`hop.EXPORT_CATCH_UP_S`)
            logger.warning("frames lost in a move", extra={"pod": source.pod, "frames": after - read})
        self._perform(machine.exported(move, blob, after, read))

    async def _move_imported(self, machine: relaying.Relaying, move: moving.Moving, target: Placed,
                             blob: bytes) -> None:
        path = hop.RESUME_PATH if move.resuming else hop.IMPORT_PATH
        self._perform(machine.imported(move, target, await self._owner.import_blob(target, blob, path)))

    async def _move_dialled(self, machine: relaying.Relaying, move: moving.Moving, target: Placed,
                            import_id: str) -> None:
        up = await self._dial(target, import_id)
        first = None if up is None else await self._first(up, target)
        if up is None or first is None:
            self._perform(machine.unreachable(move, target))
            return
        commands = machine.answered(move, target, first if isinstance(first, str) else first.decode(errors="replace"))
        if any(isinstance(command, relaying.Switch) for command in commands):
            self._target_up = up
        else:
            up.close()
        self._perform(commands)

    def _switch(self, held: tuple[str | bytes, ...]) -> None:
        """Relay from the move's target from now on and send it the frames held meanwhile, in order."""
        up, self._target_up = self._target_up, None
        assert up is not None
        self._adopt(up)
        for data in held:
            up.send(data)
        self._owner.stats.frames_up += len(held)

    @property
    def _pod(self) -> str | None:
        """The pod the session runs on, for the log."""
        return None if self._machine is None else self._machine.serving.pod

    def _finish(self) -> None:
        """Once: close the upstream, stop counting the session."""
        if self._done:
            return
        self._done = True
        if self._machine is not None:
            self._machine.end()
        for task in list(self._io):
            task.cancel()
        self._end_turn()
        for up in (self._up, self._target_up):
            if up is not None:
                up.close()
        if self._up is not None:
            self._owner.relaying(self._pool, -1)
        self._owner.leg_done(self)
