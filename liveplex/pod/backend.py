"""`EngineBackend`: a pod's live sockets over its engine's channel (`LiveHandle`).

Each start goes to the engine queue; the session's outputs come back once per tick through the
channel's one hand-off, and the leg feeds them to the socket's `Connection` synchronously. A
draining pod, or one whose engine is not running, answers new starts `server_busy` at once, so a
gateway places them elsewhere (platform §5). The pod trusts the gateway's session-id header:
the NetworkPolicy lets only gateways reach pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Mapping
from typing import NamedTuple, Protocol

from websockets.datastructures import Headers

from liveplex.gptlive import connection, errors, events
from liveplex.gptlive.served import Served
from liveplex.gptlive.server import backend, hop, replies
from liveplex.gptlive.server.front import Front
from liveplex.gptlive.server.replay import Replay
from liveplex.gptlive.settings import Settings
from liveplex.live import channel, contract
from liveplex.pod import handover, pause, stats, vad, wake
from liveplex.pod.parking import Parked

logger = logging.getLogger(__name__)




class Settles(Protocol):
    """Where a pod's session outcomes go at once (the Redis heartbeat, `heartbeat.Heartbeat`): a
    session a gateway placed leaves its reservation exactly when it starts or is refused."""

    def accepted(self, session_id: str) -> None:
        """The session `session_id` started."""

    def released(self, session_id: str) -> None:
        """The start a gateway placed as `session_id` was refused: its reservation is given back."""

    def ended(self) -> None:
        """A session ended: one fewer active."""


class Occupancy(NamedTuple):
    capacity: int
    active: int
    paused: int


class EngineLeg:
    """One session on the engine: caller audio in, the tick's outputs out to the peer."""

    def __init__(self, opened: channel.Opened | None, peer: backend.Peer, checkpoints: bool = False) -> None:
        self._opened = opened
        """None while no engine holds the session (paused, or a call waiting for its caller's
        first speech: `pause.Pausing`)."""
        self._peer = peer
        self._checkpoints = checkpoints
        """A gateway relays this session: its outputs carry `contract.Checkpoint`s for it."""
        self.record = bytearray()
        """The session's resume record as its checkpoints made it (a relayed session's), for the
        gateway a caller re-attaches through, which has none; up to `hop.MAX_RECORD_BYTES`."""
        self.replay = Replay() if checkpoints else None
        """What the session's socket sent lately (`Peer.replay`), for a caller who re-attaches."""
        peer.replay = self.replay
        self.pausing: pause.Pausing | None = None
        """The session's idle pause, on a pod that pauses (docs/pause.md)."""
        if opened is not None:
            opened.output.listen(self._on_outputs)

    @property
    def peer(self) -> backend.Peer:
        return self._peer

    def rebind(self, peer: backend.Peer) -> None:
        """The session's outputs go to `peer` from now on (parked, or re-attached)."""
        self._peer = peer
        peer.replay = self.replay

    @property
    def engine_id(self) -> int | None:
        """The session's id in the engine (`Opened.id`) while this leg holds it."""
        return None if self._opened is None else self._opened.id

    async def caught_up(self, messages: int) -> None:
        """Wait (at most `hop.EXPORT_CATCH_UP_S`) until the socket has read `messages` messages:
        the gateway's frames sent before it asked for the export, still on their way."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(hop.EXPORT_CATCH_UP_S):
                await self._peer.reached(messages)

    def freeze(self) -> int:
        """The session leaves at the next tick boundary: read no more client messages into it;
        how many were read (`hop.READ_HEADER`)."""
        return self._peer.freeze()

    def _on_outputs(self) -> None:
        """The hand-off's listener: this session's outputs of the tick, delivered at once."""
        opened = self._opened
        if opened is None:
            return
        try:
            outputs = opened.output.drain()
            if self.pausing is not None and outputs:
                instead = self.pausing.outputs(outputs)
                outputs = outputs if instead is None else instead
            if self._checkpoints:
                outputs = self._checkpointed(outputs)
            if outputs and type(last := outputs[-1]) is contract.Closed \
                    and last.reason is contract.CloseReason.HANDED_OVER:
                self._handed_over(outputs[:-1])
                return
            if outputs:
                self._peer.deliver(outputs)
            if self._opened is opened and opened.output.ended:
                opened.output.listen(None)
                self._peer.deliver([])
        except Exception:
            logger.error("live socket output handler failed", exc_info=True)
            self._peer.deliver([])

    def _checkpointed(self, outputs: list[contract.Output]) -> list[contract.Output]:
        """Deliver the outputs up to the last checkpoint, each checkpoint going to the gateway as
        a `hop.CHECKPOINT` event in its place (never to the `Connection`: the client never sees
        it); what follows the last one is returned for the usual path."""
        start = 0
        for i, o in enumerate(outputs):
            if type(o) is contract.Checkpoint:
                if i > start:
                    self._peer.deliver(outputs[start:i])
                if len(self.record) + len(o.data) <= hop.MAX_RECORD_BYTES:
                    self.record += o.data
                self._peer.send_verbatim(hop.checkpoint_event(o.data), False)
                start = i + 1
        return outputs[start:] if start else outputs

    def handed_over(self) -> None:
        """The session left this pod out of the engine (a paused one moved): its socket closes."""
        self._handed_over([])

    def _handed_over(self, outputs: list[contract.Output]) -> None:
        """The session left the engine: its last frames, then the socket closes with the hop's
        `HANDED_OVER_CLOSE` and no `session.closed` (the gateway continues it elsewhere)."""
        if outputs:
            self._peer.deliver(outputs)
        self._peer.handed_over()

    def append(self, pcm: bytes) -> None:
        if self.pausing is not None:
            self.pausing.append(pcm)
        elif self._opened is not None:
            self._opened.audio.send(pcm)

    # --- pause.Leg: the idle pause's hold on the session ------------------------------------------------

    def feed(self, pcm: bytes) -> None:
        if self._opened is not None:
            self._opened.audio.send(pcm)

    def attach(self, opened: channel.Opened) -> None:
        self._opened = opened
        opened.output.listen(self._on_outputs)

    def detach(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            opened.output.listen(None)
            opened.audio.close()
            opened.output.close()

    def deliver(self, outputs: list[contract.Output]) -> None:
        self._peer.deliver(outputs)

    def frames_sent(self) -> int:
        return self._peer.conn.frames_sent

    def beat(self) -> None:
        self._peer.send_verbatim(hop.OUT_BEAT, False)

    def say(self, text: str) -> None:
        if self._opened is not None:
            self._opened.audio.say(text)

    def forward(self, data: str | bytes) -> None:
        raise RuntimeError("an engine session is not relayed")

    def hangup(self) -> None:
        if self.pausing is not None and self.pausing.hangup():
            return
        if self._opened is not None:
            self._opened.audio.close()

    def ask_to_move(self) -> None:
        """Ask the gateway relaying this session to move it (`hop.MOVE_REQUESTED`): the pod drains,
        or its wake found the pod full. A paused session moves as its blob (`Pausing.move_out`)."""
        if self._opened is not None or (self.pausing is not None and self.pausing.movable()):
            self._peer.send_verbatim(hop.MOVE_REQUEST, False)

    def release(self) -> None:
        if self.pausing is not None:
            self.pausing.release()
        opened, self._opened = self._opened, None
        if opened is not None:
            opened.audio.close()
            opened.output.close()


class EngineBackend:
    """See the module docstring; `handle` is set while the engine runs."""

    def __init__(self, served: Served, settings: Settings, reattach_grace_s: float = 0.0,
                 pausing: pause.PauseSettings | None = None) -> None:
        self.served = served
        self._pause = pausing or pause.PauseSettings()
        """The pod's idle pause (docs/pause.md): WebSocket sessions' when `on`, a call's wake
        policy's whenever the pod can pause (`served.pauses`)."""
        self._detector = vad.Silero() if self._pause.on else None
        """The model, loaded at once for a pod that pauses its sockets, else at the first call
        that asks (`_stream`)."""
        self.pause_stats = pause.PauseStats()
        self._settings = settings
        self._grace_s = reattach_grace_s
        """How long a relayed session whose socket dropped is kept for its caller (`Parked`)."""
        self.front: Front | None = None
        """The pod's front end (set once it is built): a parked session is one of its sessions
        (a drain's deadline ends it), and its outcomes are told to its counters and this backend."""
        self._parked: dict[str, Parked] = {}
        """Relayed sessions whose socket dropped, by session id, until re-attached or ended."""
        self.parking = stats.Parking()
        """What the re-attaches did, for `/metrics` (`parking_snapshot`)."""
        self._given: weakref.WeakKeyDictionary[connection.Connection, str] = weakref.WeakKeyDictionary()
        """Sockets whose session id a gateway gave: their refusals release its reservation."""
        self.settles: Settles | None = None
        """The pod's heartbeat, told each outcome at once."""
        self.handle: channel.LiveHandle | None = None
        self.draining = False
        """Set by `Pod.drain`: new starts are `server_busy`, running sessions go on."""
        self.imports = handover.Imports(served.info.max_sessions)
        """Blobs the import route checked, waiting for their sockets."""
        self._import_of: weakref.WeakKeyDictionary[connection.Connection, str] = weakref.WeakKeyDictionary()
        """Sockets that continue a held import (`hop.IMPORT_HEADER`)."""
        self._legs: weakref.WeakValueDictionary[str, EngineLeg] = weakref.WeakValueDictionary()
        """Sessions a gateway relays, by the session id it gave: what the export route names, and
        the ones a draining pod asks it to move."""

    def request_moves(self) -> int:
        """Ask the gateways relaying this pod's sessions to move them elsewhere (the pod drains);
        how many were asked."""
        legs = list(self._legs.values())
        for leg in legs:
            leg.ask_to_move()
        return len(legs)

    def refusal(self, headers: Headers | None = None) -> replies.Reply | None:
        if self.handle is None:
            return replies.NOT_READY
        if headers is not None and hop.REATTACH_HEADER in headers and self._running(headers) is None:
            self.parking.reattaches["not_found"] += 1
            return handover.NOT_FOUND
        return None

    def _running(self, headers: Headers) -> EngineLeg | None:
        """The relayed session the upgrade's `SESSION_ID_HEADER` names, if it runs here (on a
        socket or parked)."""
        given = headers.get(hop.SESSION_ID_HEADER)
        if given is None:
            return None
        parked = self._parked.get(given)
        leg = self._legs.get(given) if parked is None else parked.leg
        return leg if isinstance(leg, EngineLeg) and leg.engine_id is not None else None

    def connection(self, headers: Headers, now_ns: int, query: Mapping[str, str],
                   media: bool = False) -> connection.Connection:
        """A gateway's socket may carry a media session's start (its WebRTC call's): the gateway
        checked the transport, and the pod trusts the gateway."""
        if hop.REATTACH_HEADER in headers:
            leg = self._running(headers)
            if leg is not None:  # the session's own machine: its state, usage and id go on
                return leg.peer.conn
        given = headers.get(hop.SESSION_ID_HEADER)
        session_id = given if given is not None and events.SESSION_ID.fullmatch(given) else None
        conn = connection.Connection(self.served, self._settings, now_ns, session_id,
                                     pausable=self._pause.on, media=media or session_id is not None,
                                     stores=session_id is not None)
        if session_id is not None:
            self._given[conn] = session_id
        key = headers.get(hop.IMPORT_HEADER)
        if key is not None:
            self._import_of[conn] = key
        return conn

    async def export(self, session_id: str, after: int = 0) -> handover.Exported | replies.Reply:
        """Hand the session the gateway opened as `session_id` over at the next tick boundary,
        once its socket's first `after` messages were read (`hop.EXPORT_PATH`). From then on its
        socket reads nothing into it: the blob holds exactly the messages read, and the gateway
        resends the session's next pod those it sent after them."""
        leg, handle = self._legs.get(session_id), self.handle
        engine_id = None if leg is None else leg.engine_id
        if leg is not None and engine_id is None and leg.pausing is not None and leg.pausing.movable():
            return await self._export_paused(leg, after)
        if leg is None or engine_id is None:
            return handover.NOT_FOUND
        if handle is None:
            return replies.NOT_READY
        await leg.caught_up(after)
        read = leg.freeze()
        data = await handover.wait(handle.export(engine_id))
        return handover.NOT_RUNNING if data is None else handover.Exported(data, read)

    async def _export_paused(self, leg: EngineLeg, after: int) -> handover.Exported | replies.Reply:
        """A paused session's export: its blob is held here, marked with its pause; its socket
        then closes as a running one's does after its last frame (`hop.HANDED_OVER_CLOSE`)."""
        await leg.caught_up(after)
        pausing = leg.pausing
        if pausing is None or not pausing.movable():  # woken or ended meanwhile
            return handover.NOT_RUNNING
        read = leg.freeze()
        data = pausing.move_out()
        asyncio.get_running_loop().call_soon(leg.handed_over)
        return handover.Exported(data, read)

    def _may_pause(self) -> bool:
        s, p = self.pause_stats, self._pause
        return wake.may_pause(s.paused, s.leaving, s.parked_bytes, s.park_bytes, p.max_paused, p.host_budget_bytes)

    # --- re-attach: a relayed session outlives its gateway's socket ---------------------------------

    def park(self, peer: backend.Peer, leg: backend.Leg) -> bool:
        session_id = self._given.get(peer.conn)
        if (self.front is None or not isinstance(leg, EngineLeg) or session_id is None or leg.replay is None
                or self._grace_s <= 0
                or leg.engine_id is None or peer.conn.state is not connection.State.LIVE):
            return False
        parked = Parked(peer.conn, leg, leg.replay, self.front, (self.front.stats, self), self._grace_s)
        leg.rebind(parked)
        self._parked[session_id] = parked
        logger.info("session parked: its socket dropped", extra={"session_id": session_id,
                                                                  "grace_s": self._grace_s})
        return True

    def parking_snapshot(self) -> stats.ParkingSnapshot:
        return self.parking.snapshot(len(self._parked))

    forks = False
    """A pod keeps no stored session (its gateway does, docs/storage.md): nothing to fork."""

    def fork(self, peer: backend.Peer, session_id: str, webrtc: bool = False) -> None:
        raise RuntimeError("a pod forks nothing")

    def reattach(self, peer: backend.Peer, headers: Headers, query: Mapping[str, str]) -> EngineLeg | None:
        """A gateway continues the session `SESSION_ID_HEADER` names (`hop.REATTACH_HEADER`):
        `peer.conn` is already its machine (`connection`). The socket that held it is closed, the
        hop's opening words written (`hop.REATTACH_HEADER` lists them), then what it missed."""
        if hop.REATTACH_HEADER not in headers:
            return None
        leg = self._running(headers)
        if leg is None or leg.peer.conn is not peer.conn:
            return None
        session_id = self._given[peer.conn]
        parked = self._parked.pop(session_id, None)
        old = leg.peer
        self.parking.reattached(None if parked is None else parked.parked_ns, time.monotonic_ns())
        if parked is not None:
            parked.unpark()
        else:
            old.taken_over()
        leg.rebind(peer)
        replay = leg.replay
        assert replay is not None and peer.conn.resource is not None
        missed = replay.missed(headers.get(hop.REATTACH_HEADER, ""))
        resource = peer.conn.resource
        peer.send_verbatim(hop.reattached_event(peer.conn.frames_sent, resource.expires_at, len(missed)), False)
        peer.send_verbatim(hop.checkpoint_event(bytes(leg.record)), False)
        for text in missed:
            peer.send_verbatim(text, False)
        logger.info("session re-attached", extra={"session_id": session_id, "replayed": len(missed),
                                                   "was_parked": parked is not None})
        if self.draining:
            leg.ask_to_move()
        return leg

    # --- backend.Observer: each outcome to the heartbeat -----------------------------------------------

    def session_accepted(self, conn: connection.Connection, outcome: connection.Accepted) -> None:
        if self.settles is not None:
            self.settles.accepted(outcome.session_id)

    def session_refused(self, conn: connection.Connection, outcome: connection.Refused) -> None:
        given = self._given.get(conn)
        if self.settles is not None and given is not None:
            self.settles.released(given)

    def session_ended(self, conn: connection.Connection, outcome: connection.Ended) -> None:
        if self._parked.pop(outcome.session_id, None) is not None:
            self.parking.ended(outcome.reason)
        if self.settles is not None:
            self.settles.ended()

    def free_slots(self) -> int | None:
        """Sessions the pod admits beyond those it holds, on a pod that may pause (`wake.free_slots`:
        slots kept for wakes); None when it cannot (the engine's own cap decides)."""
        if not self._pause.on and not self.served.pauses:
            return None
        held = 0 if self.front is None else self.front.stats.sessions_open
        paused, p = self.pause_stats.paused, self._pause
        return wake.free_slots(self.served.info.max_sessions, max(0, held - paused), paused, p.wake_reserve,
                               wake.most_paused(p.max_paused, p.host_budget_bytes, self.pause_stats.park_bytes))

    def occupancy(self) -> Occupancy:
        """What the heartbeat publishes (`PodRecord`): sessions in the engine's batch, those held
        out of it, and the capacity placement compares `active` with, so that what it offers is
        what `start` admits (`free_slots`)."""
        held = 0 if self.front is None else self.front.stats.sessions_open
        paused = self.pause_stats.paused
        active = max(0, held - paused)
        free = self.free_slots()
        return Occupancy(self.served.info.max_sessions if free is None else active + free, active, paused)

    def start(self, start: connection.Start, peer: backend.Peer) -> EngineLeg | None:
        handle = self.handle
        if self.draining or handle is None or self.free_slots() == 0:
            peer.refuse(errors.server_busy(self.served.info.max_sessions))
            return None
        key = self._import_of.pop(peer.conn, None)
        session_id = self._given.get(peer.conn)
        checkpoints = session_id is not None  # a gateway relays it: it keeps the resume record
        if start.wake is not None and key is None:
            return self._waiting(start, peer, handle, session_id)
        if key is None:
            result = handle.start(start.session, checkpoints)
        else:
            held = self.imports.take(key, handover.now())
            if held is None or held.header.voice != start.session.voice:
                why = "is unknown or expired" if held is None else f"holds voice {held.header.voice}"
                peer.refuse(errors.server_error(f"the import {errors.echo(key)} {why}"))
                return None
            moved = pause.unmark(held.data) if self._pause.on or self.served.pauses else None
            if moved is not None:
                return self._arrived(start, peer, handle, session_id, held, moved)
            result = handle.resume(start.session, held.data, checkpoints)
        if result is channel.Rejected.FULL:
            peer.refuse(errors.server_busy(self.served.info.max_sessions))
            return None
        if isinstance(result, channel.Rejected):
            peer.refuse(errors.server_error(result.value))
            return None
        return self._leg(result, peer, handle, start, session_id)

    def _waiting(self, start: connection.Start, peer: backend.Peer, handle: channel.LiveHandle,
                 session_id: str | None) -> EngineLeg:
        """A call with a wake policy: connected and started, billed as paused, in no engine until
        its caller speaks (the wake machine's waiting state); its `session.started` is the pod's."""
        leg = self._leg(None, peer, handle, start, session_id, wait_first=True)
        started: list[contract.Output] = [contract.Started()]
        asyncio.get_running_loop().call_soon(leg.deliver, started)
        return leg

    def _arrived(self, start: connection.Start, peer: backend.Peer, handle: channel.LiveHandle,
                 session_id: str | None, held: handover.Held, moved: pause.Moved) -> EngineLeg:
        """A paused session moved here (`pause.Moved`): started where it ran (its `Started` is the
        pod's, the gateway swallows it), held paused, woken at once if its caller spoke."""
        leg = self._leg(None, peer, handle, start, session_id, always=True)
        pausing = leg.pausing
        assert pausing is not None

        def arrive() -> None:
            leg.deliver([contract.Started(held.header.frames)])
            pausing.arrive(moved)
        asyncio.get_running_loop().call_soon(arrive)
        return leg

    def _leg(self, opened: channel.Opened | None, peer: backend.Peer, handle: channel.LiveHandle,
             start: connection.Start, session_id: str | None, wait_first: bool = False,
             always: bool = False) -> EngineLeg:
        """The session's leg, kept by its given id, with its idle pause: its call's wake policy,
        else the pod's for its sockets (`always`: a paused session that moved here, on a pod that
        can pause, without either)."""
        checkpoints = session_id is not None  # a gateway relays it: it keeps the resume record
        leg = EngineLeg(opened, peer, checkpoints)
        if session_id is not None:
            self._legs[session_id] = leg
        if start.wake is not None:
            policy = wake.Policy(start.wake.vad_threshold, start.wake.idle_timeout_s, wait_first)
        elif self._pause.on:
            policy = self._pause.policy()
        elif always:
            policy = wake.Policy(self._pause.vad_threshold)
        else:
            return leg
        if self._detector is None:
            self._detector = vad.Silero()
        leg.pausing = pause.Pausing(leg, handle, start.session, checkpoints, wake.Machine(policy),
                                    self._detector.stream(), self.pause_stats, self._may_pause)
        return leg
