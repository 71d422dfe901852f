"""`UpstreamLeg`: the shell that places one client session on a pod and relays it (platform §7.3-§7.9).

It owns the session's I/O and decides nothing: two sans-I/O machines do, each tested on its own.
What it shares with the gateway's other legs (`Shared`) has one owner a role: placement with its
fallback and the breakers (`Placer`, `placer.RedisPlacer`), the dial, TLS and the handover routes
(`pod_link.PodLink`), the counters (`GatewayStats`) and the turns of moves.

- **Until the session starts**, one task drives `placing.Placing` (every retry rule): placement,
  the pod opened with the session id and the client's `session.start` (`PodLink.open`), the pod's
  first answer fed back. `session.started` is relayed and hands the client's socket over
  (`Peer.handed_off`).
- **From then on** there is no task: frames move by callbacks in both directions, and
  `relaying.Relaying` says what each means. The leg hands it every pod message
  (`upstream_message`), client frame (`client_frame`) and the pod socket's end (`upstream_gone`),
  and performs the commands it answers, in order (`_perform`, one `case` a command): relay,
  forward, end the client's socket with the pod's code, lose the session (`server_error` +
  `connection_lost` + 1011), trip a breaker, count. An audio delta and a client frame cost the
  machine one call that answers a constant (`RELAY_FRAME`, `FORWARD`), told by identity: no
  command object per frame.
- **Moves and resumes** (`hop.MOVE_REQUESTED` from a draining pod; a pod lost with a record of the
  session kept): the machine wraps `moving.Moving`; a move begins once the gateway has a turn for
  it (`move_turns`: `--moves-at-once` moves at a time; resumes do not wait). The leg starts the
  I/O each step asks for (placement, the pods' handover routes, the dial) as a task, and feeds
  its outcome back naming the move it belongs to, until the session `Switch`es to the dialled
  target (whose socket the leg then adopts), stays, or is lost.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, assert_never

from liveplex.gateway import moving, placing, relaying, upstream
from liveplex.gateway.pod_link import Opened, PodLink
from liveplex.gateway.sessions import Held, SessionHolders, key_digest
from liveplex.gateway.stats import GatewayStats
from liveplex.gateway.storing import Recorder, StoredCall
from liveplex.gptlive import connection, errors, events
from liveplex.gptlive.server import backend, hop
from liveplex.placement import Busy, Placed
from liveplex.tasks import Tasks

logger = logging.getLogger(__name__)

HANGUP_FRAME = events.dump(events.SessionClose())
"""What `UpstreamLeg.hang_up` sends the pod for the caller: a `session.close`, so the call ends as
GPT-Live ends a hung-up call (`session.closed` `close_requested`, then 1000), on any transport."""


class Placer(Protocol):
    """Placement as a leg uses it (`placer.RedisPlacer`): with its fallbacks, and the breakers."""

    def tripped(self) -> frozenset[str]:
        """The pods the breakers exclude now."""
        ...

    async def place(self, pool: str, session_id: str, exclude: set[str]) -> Placed | Busy | errors.ProtocolError:
        ...

    async def unreachable(self, placed: Placed, session_id: str) -> None:
        """`placed` could not be dialled, or did not answer the start: give its slot back, trip it."""

    def give_back(self, placed: Placed, session_id: str) -> None:
        """Give back a slot no session will use, whatever becomes of the leg."""

    def blame(self, pod: str) -> None:
        """The pod failed the session it ran: trip its breaker."""


@dataclass(frozen=True, slots=True)
class Shared:
    """What every leg of one gateway shares, each role with its owner."""

    placer: Placer
    link: PodLink
    stats: GatewayStats
    move_turns: asyncio.Semaphore
    """A turn per session moving off a draining pod (`GatewaySettings.moves_at_once`)."""
    sessions: SessionHolders | None = None
    """Where relayed sessions run, for a caller's re-attach through any gateway; None: not kept."""
    recorder: Recorder | None = None
    """Where stored calls (`store: true`) are written; None: this gateway stores nothing."""
    peer_url: str | None = None
    """Where the other replicas reach this one (`--peer-url`), recorded with each session so a
    hangup reaching another replica is relayed here; None: one replica."""


@dataclass(frozen=True, slots=True)
class Reattach:
    """A caller continuing its running session on this socket (`?session_id=`): the last event it saw."""

    session_id: str
    last_event_id: str


class UpstreamLeg:
    """See the module docstring; the pump calls `forward` and `release`, and `done` is told once
    when the leg lets go of the session."""

    def __init__(self, shared: Shared, start: connection.Start | Reattach, peer: backend.Peer, pool: str,
                 done: Callable[[UpstreamLeg], None], key: str = "", record: bytes | None = None) -> None:
        self._placer = shared.placer
        self._link = shared.link
        self._stats = shared.stats
        self._move_turns = shared.move_turns
        self._sessions = shared.sessions
        self._recorder = shared.recorder
        self._peer_url = shared.peer_url
        self._stored: StoredCall | None = None
        """The call's writer, while a stored call (`store: true`) is relayed here."""
        self._start = start if isinstance(start, connection.Start) else None
        """The client's start (for a re-attach, the one it started the session with, once read)."""
        self._session_id = start.resource.id if isinstance(start, connection.Start) else start.session_id
        self._peer = peer
        self._pool = pool
        self._key = key
        """The API key the client's socket carries: a re-attach must carry the session's."""
        self._done_with = done
        self._fork_record = record
        """A fork's: the stored session's resume record, which the pod placed rebuilds it from."""
        self._handed_back = False
        """Let go of while the session goes on (this gateway stops): its pod parks it, its record stays."""
        self._machine: relaying.Relaying | None = None
        """What the session's frames and its pod's end mean, from its start on."""
        self._up: upstream.Upstream | None = None
        self._done = False
        self._target: Opened | None = None
        """The dialled target of a move, until it answers."""
        self._io = Tasks()
        self._awaiting_turn = False
        self._turn: moving.Moving | None = None
        """The move that holds one of the gateway's `move_turns`, while it is under way."""
        run = self._run() if isinstance(start, connection.Start) else self._run_reattach(start)
        self._task = asyncio.get_running_loop().create_task(run)

    # --- the pump's side ----------------------------------------------------------------------------

    def append(self, pcm: bytes) -> None:
        raise RuntimeError("a relayed session's audio is forwarded as the client sent it")

    def say(self, text: str) -> None:
        raise RuntimeError("a relayed session's commentary is forwarded as the client sent it")

    def forward(self, data: str | bytes) -> None:
        machine, up = self._machine, self._up
        if machine is None or up is None:
            return
        if self._stored is not None:
            self._stored.up(data)
        commands = machine.client_frame(data, up.write_buffer_bytes)
        if commands is relaying.FORWARD:
            up.send(data)
            self._stats.frames_up += 1
        elif commands:
            self._perform(commands, data)

    def hangup(self) -> None:
        """Never asked: a relayed session's `session.close` is forwarded to the pod."""

    @property
    def session_id(self) -> str:
        return self._session_id

    def owned_by(self, key: str) -> bool:
        """Whether `key` is the API key the session's socket carries (a hangup's authority)."""
        return hmac.compare_digest(key_digest(key), key_digest(self._key))

    def hang_up(self) -> bool:
        """`POST /v1/live/sessions/{id}/hangup` reached the gateway relaying the call: end it as
        the caller's `session.close` would (`HANGUP_FRAME`). False: not relayed (yet, or any more)."""
        if self._done or self._machine is None or self._machine.ended:
            return False
        self.forward(HANGUP_FRAME)
        return True

    def hand_back(self) -> None:
        """This gateway stops: the session stays on its pod (parked, its socket closed without the
        session's end) and its caller is told to reconnect (1012), through another replica. The
        pod's socket closes first and the caller's only once it is gone (`_gone`): what the pod
        wrote before it read the close is relayed, and what it makes after is replayed on the
        re-attach, so the caller misses no event even without `last_event_id`."""
        if self._done or self._machine is None or self._machine.moving is not None or self._up is None:
            return  # not relayed yet, over, or between pods: the drain ends it as before
        if self._peer.reconnects:  # a caller that cannot reconnect stays until the drain ends it
            self._handed_back = True
            self._up.close(connection.GOING_AWAY)

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
            opened = await self._place_and_start()
        except asyncio.CancelledError:
            if self._up is not None:
                self._up.abort()
            raise
        except Exception:
            logger.error("placement failed", exc_info=True)
            if not self._done:
                self._peer.refuse(errors.server_error("placement failed"))
            return
        if opened is None:
            self._done_with(self)
            return
        self._stats.sessions_active[self._pool] += 1
        self._adopt(opened)

    def _adopt(self, opened: Opened) -> None:
        """Relay from the pod `opened` (its answer, `session.started`, read). After a move, the
        rest of its answer to the replayed start is the machine's to swallow."""
        up = self._up = opened.up
        up.lost.add_done_callback(lambda _: self._gone(up))
        up.on_message = self._message
        for message in opened.backlog:  # what the pod sent right behind `session.started`
            self._message(message)

    async def _place_and_start(self) -> Opened | None:
        """Drive `placing.Placing` (the retry policy) through placement, the dial and the pod's
        first answer; on failure tell the client and return None."""
        peer, placer, stats = self._peer, self._placer, self._stats
        started_ns = time.monotonic_ns()
        machine = placing.Placing(placer.tripped())
        command: placing.Command = machine.begin()
        opened: Opened | None = None
        while True:
            match command:
                case placing.Place(exclude=exclude):
                    command = machine.placed(await placer.place(self._pool, self._session_id, set(exclude)))
                case placing.Recheck(delay_s=delay_s):
                    await asyncio.sleep(delay_s)
                    command = machine.rechecked()
                case placing.Dial(placed=placed):
                    assert self._start is not None  # a start's leg
                    import_id = None
                    if self._fork_record is not None:
                        import_id = await self._link.offer(placed, self._fork_record, resume=True)
                        if import_id is None:  # it does not fit that pod (or the pod is full): try another
                            placer.give_back(placed, self._session_id)
                            command = machine.unreachable(placed)
                            continue
                    opened = await self._link.open(placed, self._session_id, self._pool, self._start.text, import_id)
                    if opened is None:
                        await placer.unreachable(placed, self._session_id)
                        command = machine.unreachable(placed)
                        continue
                    command = machine.answered(placed, opened.answer)
                    if not isinstance(command, placing.Start):
                        opened.up.close()
                    else:
                        self._up = opened.up  # before the hand-off: the pump replays the client's parked frames to us
                case placing.Start():
                    stats.placed(self._pool, (time.monotonic_ns() - started_ns) / 1e9, retried=command.retried)
                    if self._fork_record is not None:
                        stats.forks["started"] += 1
                        self._fork_record = None  # the pod holds it now
                    self._machine = relaying.Relaying(command.placed)
                    self._store_from(0)
                    peer.send_verbatim(command.text, False)
                    peer.handed_off(command.expires_at)
                    self._hold(command.placed)
                    return opened
                case placing.Refuse(error=error, relay=relay, busy=busy):
                    if self._fork_record is not None:
                        stats.forks["failed"] += 1
                    if busy is not None:
                        stats.refused(self._pool, busy)
                    if relay is not None:
                        peer.send_verbatim(relay, False)
                    peer.refuse(error)
                    return None
                case _:
                    assert_never(command)

    def _hold(self, placed: Placed) -> None:
        """Record where the session runs now, for a caller's re-attach through any gateway."""
        if self._sessions is not None and self._start is not None:
            self._sessions.hold(self._session_id, Held(placed.pod, placed.addr, self._pool,
                                                       key_digest(self._key), self._start.text,
                                                       self._peer_url or ""))

    def _store_from(self, frame: int) -> None:
        """A stored call (`store: true`) relayed from here on: write it from `frame` on."""
        machine, start = self._machine, self._start
        if self._recorder is None or start is None or machine is None or not start.resource.store:
            return
        self._stored = self._recorder.open(start.resource, key_digest(self._key), frame,
                                           lambda: machine.record, self._notify, self._peer.client_config)

    def _notify(self, text: str) -> None:
        """An event of the gateway's own for the caller (a stored call's `store_unavailable`)."""
        if not self._done:
            self._peer.send_verbatim(text, False)

    # --- a caller's re-attach (a task) ------------------------------------------------------------

    async def _run_reattach(self, reattach: Reattach) -> None:
        """Find the session's pod, check the caller's key, rebuild the session's start on this
        socket from its record, and continue the session on its pod (`hop.REATTACH_HEADER`)."""
        peer = self._peer
        peer.await_upstream()
        held = None if self._sessions is None else await self._sessions.holder(reattach.session_id)
        if held is None or not held.belongs_to(self._key):  # another key learns nothing more than an unknown id
            self._refuse_reattach("unknown" if held is None else "another key")
            return
        self._pool = held.pool
        placed = Placed(held.pod, held.addr)
        opened = await self._link.open(placed, self._session_id, held.pool, None, reattach=reattach.last_event_id)
        kind, note = placing.event_kind(opened.answer) if opened is not None else ("", {})
        if opened is None or kind != hop.REATTACHED:
            if opened is not None:
                opened.up.abort()  # no end: whatever the pod runs stays parked there
            self._refuse_reattach(f"its pod {held.pod} did not continue it ({kind or 'no answer'})")
            return
        start = next((c for c in peer.conn.receive(held.start, time.monotonic_ns(), time.time())
                      if isinstance(c, connection.Start)), None)
        if start is None:  # what the session started with is no longer valid here (its model unrouted)
            opened.up.abort()  # no end: the session stays parked on its pod
            self._refuse_reattach("its start is no longer valid here")
            return
        self._start = start
        frames, expires_at = note.get("frames"), note.get("expires_at")
        self._machine = relaying.Relaying(placed)
        self._store_from(frames if isinstance(frames, int) else 0)
        self._stats.sessions_active[self._pool] += 1
        peer.handed_off(expires_at if isinstance(expires_at, int) else None, frames if isinstance(frames, int) else 0)
        self._adopt(opened)
        self._hold(placed)
        self._stats.reattaches["reattached"] += 1
        logger.info("session re-attached", extra={"session_id": self._session_id, "pod": held.pod})

    def _refuse_reattach(self, why: str) -> None:
        """The caller hears `session_not_found` whatever `why` (the log's) is."""
        logger.info("re-attach refused", extra={"session_id": self._session_id, "why": why})
        self._stats.reattaches["refused"] += 1
        self._peer.close_with(errors.session_not_found(self._session_id), connection.POLICY_VIOLATION)
        self._finish()

    # --- relaying: `relaying.Relaying`'s shell (callbacks) -----------------------------------------

    def _message(self, message: str | bytes) -> None:
        machine = self._machine
        assert machine is not None  # adopted after the start
        commands = machine.upstream_message(message)
        if commands is relaying.RELAY_FRAME and isinstance(message, str):  # an audio delta is text
            self._stats.frames_down += 1
            self._peer.send_verbatim(message, True)
            if self._stored is not None:
                self._stored.down(message)
        elif commands:
            self._perform(commands)

    def _gone(self, up: upstream.Upstream) -> None:
        """The pod's transport closed (a socket the session already left means nothing)."""
        machine = self._machine
        assert machine is not None  # adopted after the start
        if self._done or up is not self._up:
            return
        if self._handed_back and self._peer.hand_back():  # the pod parked it: now its caller goes
            self._stats.handed_back += 1
            return
        self._perform(machine.upstream_gone(up.ending, up.close_code, self._placer.tripped()))

    def _perform(self, commands: relaying.Commands, frame: str | bytes = b"") -> None:
        """Carry out the machine's commands, in order; `frame`: the client's, for `Forward`."""
        machine = self._machine
        assert machine is not None
        for command in commands:
            if self._done:
                return
            match command:
                case relaying.RelayEvent(text=text):
                    self._peer.send_verbatim(text, False)
                    if self._stored is not None:
                        self._stored.event(text)
                case relaying.Forward():
                    assert self._up is not None
                    self._up.send(frame)
                    self._stats.frames_up += 1
                case relaying.Forget(why=why, record_bytes=record_bytes):
                    logger.warning(f"session record {why}; it cannot be resumed",
                                   extra={"session_id": self._session_id, "bytes": record_bytes})
                case relaying.StartMove():
                    if not self._awaiting_turn and self._turn is None:
                        self._awaiting_turn = True
                        self._spawn(self._move_in_turn(machine))
                case relaying.Abort():
                    assert self._up is not None
                    logger.warning("upstream too slow; dropping the session", extra={"pod": self._pod})
                    self._up.abort(upstream.Ending.SILENT)
                case relaying.Blame(pod=pod):
                    self._placer.blame(pod)
                case relaying.Resuming(pod=pod, ending=ending, record_bytes=record_bytes):
                    logger.warning("upstream lost; resuming the session elsewhere", extra={
                        "pod": pod, "ending": ending.value, "record_bytes": record_bytes})
                case relaying.Unreserve(placed=placed):
                    self._placer.give_back(placed, self._session_id)
                case relaying.Switch(held=held):
                    self._switch(held)
                case relaying.Moved(result=result):
                    self._stats.moves[result] += 1
                case relaying.EndClient(reason=reason, code=code, goes_on=goes_on):
                    # taken over or parked: the session goes on without this gateway, its record stays
                    self._handed_back = self._handed_back or goes_on
                    self._peer.passthrough_ended(reason, code)
                    self._finish()
                case relaying.Lose(why=why, reason=reason):
                    self._stats.sessions_lost[reason] += 1
                    self._peer.passthrough_lost(why)
                    self._finish()
                case placing.Place() | placing.Recheck() | moving.Export() | moving.Import() | moving.DialTarget():
                    self._move_io(machine, command)
                case relaying.RelayFrame():
                    raise AssertionError("an audio frame is relayed by identity (`RELAY_FRAME`)")
                case _:
                    assert_never(command)
        if self._turn is not None and machine.moving is not self._turn:  # the move is over
            self._end_turn()

    async def _move_in_turn(self, machine: relaying.Relaying) -> None:
        """Start the move a draining pod asked for once the gateway has a turn for it
        (`GatewaySettings.moves_at_once`); until then the session goes on where it is."""
        await self._move_turns.acquire()
        self._awaiting_turn = False
        commands = machine.move(self._placer.tripped())
        if not commands:  # nothing to move any more (ended, closing, or resuming meanwhile)
            self._move_turns.release()
            return
        self._turn = machine.moving
        self._perform(commands)

    def _end_turn(self) -> None:
        if self._turn is not None:
            self._turn = None
            self._move_turns.release()

    # --- moving to another pod: the I/O of `moving.Moving`'s steps (tasks) ----------------------------

    def _move_io(self, machine: relaying.Relaying,
                 command: placing.Place | placing.Recheck | moving.Export | moving.Import | moving.DialTarget) -> None:
        """Start the I/O a move's step asks for; its outcome goes back to `machine`, naming the
        move it answers for."""
        move = machine.moving
        assert move is not None
        match command:
            case placing.Place(exclude=exclude):
                self._spawn(self._move_placed(machine, move, exclude))
            case placing.Recheck(delay_s=delay_s):
                self._spawn(self._move_rechecked(machine, move, delay_s))
            case moving.Export():
                assert self._up is not None
                self._spawn(self._move_exported(machine, move, machine.serving, self._up.sent))
            case moving.Import(placed=placed, blob=blob):
                self._spawn(self._move_imported(machine, move, placed, blob))
            case moving.DialTarget(placed=placed, import_id=import_id):
                self._spawn(self._move_dialled(machine, move, placed, import_id))
            case _:
                assert_never(command)

    def _spawn(self, io: Coroutine[Any, Any, None]) -> None:
        self._io.spawn(io)

    async def _move_placed(self, machine: relaying.Relaying, move: moving.Moving, exclude: frozenset[str]) -> None:
        self._perform(machine.placed(move, await self._placer.place(self._pool, self._session_id, set(exclude))))

    async def _move_rechecked(self, machine: relaying.Relaying, move: moving.Moving, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._perform(machine.rechecked(move))

    async def _move_exported(self, machine: relaying.Relaying, move: moving.Moving, source: Placed,
                             after: int) -> None:
        """The blob, once the pod has read the `after` messages sent to it, and how many it read."""
        got = await self._link.export(source, self._session_id, after)
        blob, read = (None, after) if got is None else got
        if read < after:  # the pod gave up waiting for them (`hop.EXPORT_CATCH_UP_S`)
            logger.warning("frames lost in a move", extra={"pod": source.pod, "frames": after - read})
        self._perform(machine.exported(move, blob, after, read))

    async def _move_imported(self, machine: relaying.Relaying, move: moving.Moving, target: Placed,
                             blob: bytes) -> None:
        self._perform(machine.imported(move, target, await self._link.offer(target, blob, move.resuming)))

    async def _move_dialled(self, machine: relaying.Relaying, move: moving.Moving, target: Placed,
                            import_id: str) -> None:
        assert self._start is not None  # the session started, or was re-attached, before it could move
        opened = await self._link.open(target, self._session_id, self._pool, self._start.text, import_id)
        if opened is None:
            await self._placer.unreachable(target, self._session_id)
            self._perform(machine.unreachable(move, target))
            return
        commands = machine.answered(move, target, opened.answer)
        if any(isinstance(command, relaying.Switch) for command in commands):
            self._target = opened
        else:
            opened.up.close()
        self._perform(commands)

    def _switch(self, held: tuple[str | bytes, ...]) -> None:
        """Relay from the move's target from now on and send it the frames held meanwhile, in order."""
        opened, self._target = self._target, None
        assert opened is not None and self._machine is not None
        self._adopt(opened)
        self._hold(self._machine.serving)
        for data in held:
            opened.up.send(data)
        self._stats.frames_up += len(held)

    @property
    def _pod(self) -> str | None:
        """The pod the session runs on, for the log."""
        return None if self._machine is None else self._machine.serving.pod

    def _finish(self) -> None:
        """Once: close the upstream, stop counting the session."""
        if self._done:
            return
        self._done = True
        if self._stored is not None:
            self._stored.end(ended=not self._handed_back)
        if self._machine is not None:
            self._machine.end()
        for task in self._io:
            task.cancel()
        self._end_turn()
        for up in (self._up, None if self._target is None else self._target.up):
            if up is not None:
                up.close(connection.GOING_AWAY if self._handed_back else hop.ENDS_SESSION_CLOSE)
        if self._up is not None:
            self._stats.sessions_active[self._pool] -= 1
            if self._sessions is not None and not self._handed_back:  # ended, or its caller left
                self._sessions.forget(self._session_id)
        self._done_with(self)
