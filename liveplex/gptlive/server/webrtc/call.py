"""`Call`: one WebRTC session, the second pump beside the live socket (`native.LiveSocket`).

It is what a live socket is to the backend (a `backend.Peer`) and to the server (a `Socket` the
sweeper fires and a shutdown ends), over an `RTCPeerConnection` instead of a WebSocket. The
session's machine is the same `Connection` (a pod's engine; the gateway's until its upstream
starts the session, then `passthrough.Passthrough`), stepped synchronously; only the ends differ:

- the start is the POST's `session.start`, read before the answer is sent; the POST waits for it
  to be taken (`answered`) and answers the SDP, or the refusal as an HTTP error body;
- a re-offer (the POST's `?session_id=`: a browser whose gateway vanished) starts nothing: the
  backend continues the running session on this call (`Backend.reattach`, the WebSocket
  re-attach's leg), and the POST answers once it took it, or `session_not_found`;
- the caller's audio arrives as RTP, is decoded as it arrives on the decode thread
  (`receive.Prompt`) by libopus straight to 24 kHz, losses concealed (`media.Heard`), and enters
  the machine as `Connection.media` (muting and the session state as for a chunk); on a relayed
  session it is forwarded as the `session.input_audio.append` a socket would have sent;
- the agent's audio deltas are decoded and played on the call's track (`media.AgentTrack`),
  every other event goes to the `oai-events` data channel (when `offer.Policy` lets it), held in
  order until the channel opens, `session.started` first;
- the channel's messages are screened (`channel.screen`) and read by the machine, or forwarded;
- the end: the machine's `Close` closes the peer connection once the channel has sent what it
  holds (at most `CLOSE_GRACE_S`); the peer connection failing or closing, the channel closing,
  or the channel not opened `webrtc_open_timeout_s` after the answer is the caller leaving.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import orjson
from aiortc import (
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCIceTransportPolicy,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamTrack
from websockets.datastructures import Headers

from liveplex.gptlive import connection, errors, events, fork, urls
from liveplex.gptlive.server import backend, passthrough, replies
from liveplex.gptlive.server.peer import PeerCore
from liveplex.gptlive.server.webrtc import channel, ice, media, receive
from liveplex.gptlive.server.webrtc.offer import Offer, Policy, ask_fec, policy_of
from liveplex.gptlive.server.webrtc.sideband import Sideband
from liveplex.tasks import Tasks

if TYPE_CHECKING:
    from liveplex.gptlive.server.front import Front
    from liveplex.gptlive.server.settings import ServerSettings

logger = logging.getLogger(__name__)

CHANNEL_LABEL = "oai-events"
"""The data channel the caller opens before its offer (OpenAI's WebRTC guide)."""
CLOSE_GRACE_S = 2.0
"""At the end, how long the channel gets to send what it holds (`session.closed`)."""
MAX_BACKLOG = 64
"""Channel messages held while the machine is not reading (an error budget spent)."""

_CLOSING = Tasks()
"""Peer connections being closed (a task the loop must not lose)."""
_AUDIO_PREFIX = events.AUDIO_DELTA_PREFIX
_ERROR_PREFIX = '{"type":"' + events.SERVER_TYPES[events.Error] + '"'
_STARTED_PREFIX = '{"type":"' + events.SERVER_TYPES[events.SessionStarted] + '"'
_CHANNEL = object()
"""`Call._origin` while a data channel message is read (else the sideband reading, or None)."""
_TRUSTED = Policy()
"""The sideband's screen: every event type may be sent (only start and audio are refused)."""
_APPEND_PREFIX = '{"type":"' + events.CLIENT_TYPES[events.InputAudioAppend] + '","audio":"'
def ice_configuration(settings: ServerSettings) -> RTCConfiguration:
    """A call's own ICE: the configured STUN/TURN servers (none: host candidates only), with a
    credential minted for this call from the TURN secret, or the static one; relayed candidates
    only when asked (`webrtc_relay_only`)."""
    secret = settings.webrtc_ice_secret
    credential = (ice.fresh(secret, int(time.time()) + settings.webrtc_ice_ttl_s) if secret is not None
                  else ice.Credential(settings.webrtc_ice_username or "", settings.webrtc_ice_password or ""))
    servers = [RTCIceServer(list(settings.webrtc_ice_servers), credential.username or None,
                            credential.password or None)] if settings.webrtc_ice_servers else []
    policy = RTCIceTransportPolicy.RELAY if settings.webrtc_relay_only else RTCIceTransportPolicy.ALL
    return RTCConfiguration(iceServers=servers, iceTransportPolicy=policy)


class Call(PeerCore):
    """See the module docstring; made by the POST, which then awaits `answer`."""

    def __init__(self, front: Front, offer: Offer, headers: Headers, key: str,
                 query: Mapping[str, str] | None = None, fork_of: str | None = None) -> None:
        query = query or {}
        super().__init__(front.backend.connection(headers, time.monotonic_ns(), query, media=True))
        self._front = front
        self._headers = headers
        self._query = query
        """The POST's query: a re-offer's `session_id` (and `last_event_id`)."""
        self._continues = query.get(urls.REATTACH_QUERY)
        """The running session this call continues (a re-offer), or None: the offer's session starts."""
        self._fork_of = fork_of
        """The stored session this call forks (`POST .../{id}/fork`): its start waits for it."""
        self.key = key
        """The API key of the create: a sideband must attach with it."""
        self.sideband: Sideband | None = None
        self._origin: object | None = None
        """Whose message the machine is reading: `_CHANNEL`, the sideband, or None (its own)."""
        self._started = ""
        """`session.started` as sent: replayed to a sideband on attach."""
        self._backend = front.backend
        self._stats = front.stats
        self._offer = offer
        self._policy = offer.policy
        self.client_config = offer.client
        self._leg: backend.Leg | None = None
        self._pc = RTCPeerConnection(ice_configuration(front.settings))
        self._agent = media.AgentTrack()
        self._heard = media.Heard()
        self._prompt: receive.Prompt | None = None
        """The caller's audio (its first audio receiver's), once the offer is read."""
        self._channel: RTCDataChannel | None = None
        self._outbox: list[str] = []
        """Events for the channel before it opens, in order."""
        self._outbox_bytes = 0
        self._answer: asyncio.Future[replies.Reply | None] = asyncio.get_running_loop().create_future()
        """Set once the start is taken (None) or refused (the HTTP error)."""
        self._listening: asyncio.Task[None] | None = None
        self._open_timer: asyncio.TimerHandle | None = None
        self._done = False
        self._closed = False
        self.session_id = ""
        """The session's id, once the start is read."""

    # --- the POST ---------------------------------------------------------------------------------

    async def answer(self) -> replies.Reply:
        """Read the offer, start the session, and answer: 200 with the SDK's `LiveCreateResponse`
        (the session's id, the SDP answer), or the HTTP error the refusal is."""
        self._pc.on("track", self._on_track)
        self._pc.on("datachannel", self._datachannel)
        self._pc.on("connectionstatechange", self._state_changed)
        try:
            await self._pc.setRemoteDescription(RTCSessionDescription(self._offer.sdp, "offer"))
            prompts = receive.install(self._pc, lambda: receive.Prompt(self._heard.packet))
            for other in prompts[1:]:  # a second microphone is not listened to (closed before any packet)
                other.close()
            self._prompt = prompts[0] if prompts else None
            self._pc.addTrack(self._agent)
            await self._pc.setLocalDescription(await self._pc.createAnswer())
        except Exception as exc:  # aiortc raises what its parser met: ValueError, KeyError, ...
            await self._pc.close()
            return replies.protocol_error(errors.invalid_sdp(f"the WebRTC stack could not answer it ({exc!r})"))
        self._front.join(self)
        self._stats.sockets_open += 1
        try:
            self._begin()
            reply = await self._answer
        except BaseException:  # the server stops while the start is pending
            self._close()
            raise
        if reply is not None:
            self._close()
            return reply
        if self._front.holders is not None:  # recorded before the id is told: a sideband may follow at once
            await self._front.holders.hold(self.session_id)
        self._open_timer = asyncio.get_running_loop().call_later(
            self._front.settings.webrtc_open_timeout_s, self._never_opened)
        return 200, orjson.dumps({"session": {"id": self.session_id},
                                  "transport": {"type": "webrtc", "sdp": ask_fec(self._pc.localDescription.sdp)}})

    def _begin(self) -> None:
        """The offer's session starts; a re-offer's continues on this call instead, if this
        server's backend holds it for the caller's key (a gateway's record); a server that
        continues no session (a lone pod) knows none."""
        if self._fork_of is not None:  # read from the store first (`Backend.fork`), then `fork_from`
            self.await_upstream()
            self._backend.fork(self, self._fork_of, webrtc=True)
            return
        session_id = self._continues
        if session_id is None:
            self._dispatch(self._offer.start_text)
            return
        self.session_id = session_id
        self._leg = self._backend.reattach(self, self._headers, self._query)
        if self._leg is None and not self._answer.done():
            self.close_with(errors.session_not_found(session_id), connection.POLICY_VIOLATION)

    def fork_from(self, source: fork.Source) -> None:
        """The stored session was read: the offer's start (its overrides) forks it; a fork that
        gives no `client` inherits the stored call's data channel permissions."""
        if self._offer.client is None and source.client is not None:
            self._policy = policy_of(source.client)
            self.client_config = source.client
        super().fork_from(source)
        self._dispatch(self._offer.start_text)

    def handed_off(self, expires_at: int | None, frames: int = 0) -> None:
        """On a re-offer, the session is this call's from now on: its sideband finds it here, and
        is told its `session.started` (made from the resource: the original went to the call's
        first data channel, which no longer exists)."""
        super().handed_off(expires_at, frames)
        resource = self.conn.resource
        if self._continues is not None and resource is not None and not self._done:
            self._front.calls[self.session_id] = self
            self._started = events.dump(events.SessionStarted(resource))

    def _answered(self, reply: replies.Reply | None) -> None:
        if not self._answer.done():
            self._answer.set_result(reply)

    # --- the peer connection's events --------------------------------------------------------------

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio" and self._listening is None and not self._done:
            self._listening = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        """The caller's audio, decoded as it arrives (`receive.Prompt`, not by the track's aiortc
        decoder), into the session as whole engine frames."""
        prompt = self._prompt
        if prompt is None:
            return
        silence_s = self._front.settings.webrtc_silence_timeout_s
        try:
            while not self._done:
                pcm = await asyncio.wait_for(prompt.frames.get(), silence_s)
                if pcm is None:  # logged where it failed
                    self.lost()
                    return
                self.heard(pcm)
        except TimeoutError:
            logger.warning("webrtc caller silent; ending the call", extra={
                "session_id": self.session_id, "silence_timeout_s": silence_s})
            self.lost()
        except Exception:  # the machine failed on a frame: the call cannot go on
            logger.error("webrtc call audio failed", exc_info=True)
            self.lost()

    def _datachannel(self, dc: RTCDataChannel) -> None:
        if dc.label != CHANNEL_LABEL or self._channel is not None or self._done:
            dc.close()
            return
        self._channel = dc
        if self._open_timer is not None:
            self._open_timer.cancel()
        dc.on("message", self.receive)
        dc.on("close", self.lost)
        outbox, self._outbox, self._outbox_bytes = self._outbox, [], 0
        for text in outbox:
            dc.send(text)

    def _state_changed(self) -> None:
        if self._pc.connectionState in ("failed", "closed"):
            self.lost()

    def _never_opened(self) -> None:
        if self._channel is None:
            logger.warning("webrtc call never connected", extra={
                "session_id": self.session_id, "open_timeout_s": self._front.settings.webrtc_open_timeout_s,
                "connection_state": self._pc.connectionState})
            self.lost()

    # --- inputs -----------------------------------------------------------------------------------

    def heard(self, pcm: bytes) -> None:
        """One engine frame of the caller's audio."""
        if self._done or self._frozen:
            return
        if self._passthrough is not None:
            if self._leg is not None:
                self._counted()
                self._leg.forward(_APPEND_PREFIX + base64.b64encode(pcm).decode() + '"}')
            return
        self._perform(self.conn.media(pcm))

    def receive(self, data: str | bytes) -> None:
        """One data channel message."""
        if self._done or self._frozen:
            return
        if self._backlog or not self._machine.reading:
            if len(self._backlog) >= MAX_BACKLOG:
                self._drop(f"more than {MAX_BACKLOG} data channel messages unread")
                return
            self._backlog.append(data)
            return
        self._read(data, _CHANNEL, self._policy)

    def _read(self, data: str | bytes, origin: object, policy: Policy) -> None:
        """A message from the channel or the sideband: screened, then the machine's; what
        answers it with an `error` goes back to `origin` only."""
        self._origin = origin
        try:
            refused = channel.screen(data, policy)
            if refused is not None:
                self._send_text(events.dump(events.Error(*refused)), events.SERVER_TYPES[events.Error])
            else:
                self._dispatch(data)
        finally:
            self._origin = None

    def _dispatch(self, data: str | bytes) -> None:
        self._counted()
        if self._passthrough is not None:
            if self._leg is not None:
                self._leg.forward(data)
            return
        try:
            self._perform(self.conn.receive(data, time.monotonic_ns(), time.time()))
        except Exception:
            logger.error("webrtc call receive failed", exc_info=True)
            self._machine.disconnect()
            self._settle(self._machine)
            self._close()

    def on_timer(self, now_ns: int) -> None:
        self._perform(self.conn.timer(now_ns))
        while self._backlog and self._machine.reading and not self._done:
            self._read(self._backlog.popleft(), _CHANNEL, self._policy)

    def shutdown(self) -> None:
        if not self._done:
            self._perform(self._machine.shutdown())

    def lost(self) -> None:
        """The caller left: the peer connection failed or closed, or the channel closed."""
        if not self._done:
            self._perform(self._machine.disconnect())
            self._answered(replies.protocol_error(errors.server_error("the caller left before the session started")))
            self._close()

    def taken_over(self) -> None:
        """The session went on on another connection: hang up without ending it."""
        if not self._done:
            self._leg = None
            self._close()

    # --- the sideband (`sideband.Attachable`) ----------------------------------------------------------

    def attach(self, side: Sideband) -> None:
        self.sideband = side
        if self._started:
            side.send(self._started)

    def detach(self, side: Sideband) -> None:
        if self.sideband is side:
            self.sideband = None

    def command(self, data: str | bytes, side: Sideband) -> None:
        """A sideband message: read as a channel message would be, by the same machine."""
        if not self._done and not self._frozen and side is self.sideband:
            self._read(data, side, _TRUSTED)

    # --- backend.Peer (the rest is `PeerCore`'s) ------------------------------------------------------

    def send_verbatim(self, text: str, frame: bool) -> None:
        if self._done:
            return
        if frame:
            if self._passthrough is not None:
                self._passthrough.frames += 1
            self._agent.play(base64.b64decode(text[len(_AUDIO_PREFIX):-2]))
            return
        self._send_text(text, channel.server_type(text) if self._policy.server is not None else "")

    # --- steps ------------------------------------------------------------------------------------

    def _perform(self, commands: list[connection.Command]) -> None:
        if self._machine.outcomes:
            self._settle(self._machine)
        for command in commands:
            if type(command) is connection.Append:
                if self._leg is not None:
                    self._leg.append(command.pcm)
            elif type(command) is connection.Send:
                event = command.event
                if type(event) is events.OutputAudioDelta:  # a frame: played as RTP, never on the channel
                    self._agent.play(base64.b64decode(event.delta))
                else:
                    self._stats.sent(event)
                    self._send_text(events.dump(event), events.SERVER_TYPES[type(event)])
            elif type(command) is connection.Start:
                self.session_id = command.resource.id
                self._front.calls[self.session_id] = self
                self._leg = self._backend.start(command, self)
            elif type(command) is connection.Say:
                if self._leg is not None:
                    self._leg.say(command.text)
            elif type(command) is connection.Hangup:
                if self._leg is not None:
                    self._leg.hangup()
            elif type(command) is connection.Release:
                self._release()
            elif type(command) is connection.Close:
                self._close(command.code)
        self._follow()

    def _settle(self, machine: connection.Connection | passthrough.Passthrough | passthrough.Pending) -> None:
        """Tell the outcomes of `machine`; the start's answers the POST."""
        outcomes = machine.outcomes.copy()
        machine.outcomes.clear()
        if any(type(outcome) is connection.Accepted for outcome in outcomes):
            self._answered(None)
        backend.tell(outcomes, self.conn, (self._stats, self._backend))

    def _send_text(self, text: str, server_type: str = "") -> None:
        """An event for the caller: before the start is answered, an error is the POST's answer
        (the rest is held: `session.started` and its notes); then the sideband, and the channel
        if the policy lets the type through; an error answering one side goes to that side only."""
        if not self._started and text.startswith(_STARTED_PREFIX):
            self._started = text
        if not self._answer.done():
            if text.startswith(_ERROR_PREFIX):
                self._answered(replies.error_event(text))
                self._outbox.clear()
                return
        else:
            origin = self._origin
            answers = origin is not None and text.startswith(_ERROR_PREFIX)
            side = self.sideband
            if side is not None and (not answers or origin is side):
                side.send(text)
            if (answers and origin is not _CHANNEL) or (server_type and not self._policy.sends(server_type)):
                return
        dc = self._channel
        if dc is not None and dc.readyState == "open":
            if dc.bufferedAmount > self._front.settings.outbound_max_bytes:
                self._drop(f"more than {self._front.settings.outbound_max_bytes} bytes queued")
                return
            dc.send(text)
        elif dc is None and not self._done:
            self._outbox_bytes += len(text)
            if self._outbox_bytes > self._front.settings.outbound_max_bytes:
                self._drop(f"more than {self._front.settings.outbound_max_bytes} bytes held before the "
                           "data channel opened")
                return
            self._outbox.append(text)

    def _drop(self, why: str) -> None:
        """A caller that does not read its channel is gone, like a slow socket."""
        logger.warning("client too slow; dropping it", extra={"reason": why, "session_id": self.session_id})
        self._stats.dropped["slow_bytes"] += 1
        self._machine.disconnect()
        self._settle(self._machine)
        self._close()

    def _release(self) -> None:
        leg, self._leg = self._leg, None
        if leg is not None:
            leg.release()

    def _follow(self) -> None:
        """Follow the machine's deadline (the sweeper fires it)."""
        sweeper = self._front.sweeper
        if sweeper is None:
            return
        if self._done or self.conn.deadline_ns is None:
            sweeper.unwatch(self)
        else:
            sweeper.watch(self)

    # --- the end ----------------------------------------------------------------------------------

    def _close(self, code: int = 1000) -> None:
        """The session is over here: the peer connection closes once the channel sent what it holds,
        and the sideband with `code` (1012 for a call handed back: it reconnects, as the caller does)."""
        self._finish(code)
        if not self._closed:
            self._closed = True
            _CLOSING.spawn(self._hang_up())

    async def _hang_up(self) -> None:
        """Close once the channel has sent what it holds (aiortc's `bufferedamountlow`, at 0 bytes:
        its default threshold), or it closed, or `CLOSE_GRACE_S` passed."""
        dc = self._channel
        if dc is not None and dc.readyState == "open" and dc.bufferedAmount:
            sent = asyncio.Event()
            dc.once("bufferedamountlow", sent.set)
            dc.once("close", sent.set)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_GRACE_S):
                    await sent.wait()
        self._agent.stop()
        await self._pc.close()

    def _finish(self, code: int = 1000) -> None:
        if self._done:
            return
        self._done = True
        self._release()
        self._backlog.clear()
        self._outbox.clear()
        if self._open_timer is not None:
            self._open_timer.cancel()
        if self._front.sweeper is not None:
            self._front.sweeper.unwatch(self)
        if self in self._front.sockets:
            self._front.leave(self)
            self._stats.sockets_open -= 1
        if self._front.calls.get(self.session_id) is self:
            del self._front.calls[self.session_id]
            if self._front.holders is not None:
                self._front.holders.forget(self.session_id)
        if self.sideband is not None:
            self.sideband.close(code)
        if self._prompt is not None:
            self._prompt.close()
        self._answered(replies.protocol_error(errors.server_error("the session ended before it started")))
        listening = self._listening
        if listening is not None and listening is not asyncio.current_task():
            listening.cancel()
