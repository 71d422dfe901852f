"""`Mixer`: a stored call's recording and events, made from the frames its gateway relayed
(pure: frames in, bytes out; no clock, no I/O).

The gateway sees the call as its two ends do: the caller's frames on their way to the pod
(`session.input_audio.append`, in the session's format; a WebRTC call's media arrives as the same
appends) and the pod's audio deltas on their way back (one per 80 ms tick). The recording is
what was heard: channel 0 the caller's audio as the engine heard it, channel 1 the agent's as the
caller heard it, both decoded to 24 kHz s16le, on the agent's timeline: every delta is one frame,
and the caller audio that arrived before it fills that frame's caller channel, as the engine's
tick takes it from its jitter buffer (silence where the caller sent none; muted audio is silence,
as the pod zeroes it). Caller audio that piles up ahead of the agent (the engine's jitter buffer
drops it too) is bounded by `MAX_CALLER_BACKLOG_FRAMES`, the oldest dropped.

Relayed events are kept as JSON lines, each with the frame it arrived at: the transcripts, usage,
notes and the close.
"""

from __future__ import annotations

import binascii

import numpy as np
import orjson
import pybase64

from liveplex.gptlive import events, formats
from liveplex.live import frames

MAX_CALLER_BACKLOG_FRAMES = 25
"""Caller audio kept ahead of the agent's frames (2 s): more is dropped, the oldest first, as a
pod's jitter buffer would (its own cap is smaller: `--jitter-frames`)."""
_SAMPLE_BYTES = 2
_FRAME_BYTES = frames.FRAME_SAMPLES * _SAMPLE_BYTES
_PREFIX = events.AUDIO_DELTA_PREFIX
_APPEND = "session.input_audio.append"
_APPEND_PREFIX = '{"type":"' + _APPEND + '","audio":"'
"""How a compact append with `type` first begins (liveplex's clients, orjson's and the browser's
JSON.stringify): its audio is read by slicing; any other shape is parsed."""
_MUTE = "session.input_audio.mute"
_UNMUTE = "session.input_audio.unmute"


class Mixer:
    """One stored call's recording, fed its frames in the order the gateway relayed them."""

    def __init__(self, fmt: events.AudioFormat, first_frame: int = 0) -> None:
        self._caller_in = formats.Inbound(fmt)
        self._agent_in = formats.Inbound(fmt)
        self._caller = bytearray()
        self._agent = bytearray()
        self._muted = False
        self.frame = first_frame
        """The next agent frame's number (the session's frame count: usage and transcripts share it)."""
        self._chunk_frame = first_frame
        self._heard = bytearray()
        self._said = bytearray()
        """The frames mixed since the last take, one channel each: interleaved once, at `take`."""
        self._events = bytearray()
        self.dropped_bytes = 0
        """Caller audio dropped for running ahead of the agent (`MAX_CALLER_BACKLOG_FRAMES`)."""

    def caller(self, data: str | bytes) -> None:
        """A client frame: an append's audio is queued, mute and unmute change what it is; the rest
        (and anything unreadable, which the pod refuses) is no audio."""
        audio: object = None
        if isinstance(data, str) and data.startswith(_APPEND_PREFIX):  # compact, `type` first: no parse
            end = data.find('"', len(_APPEND_PREFIX))
            if end > 0 and data[end + 1:end + 2] in ("}", ","):
                audio = data[len(_APPEND_PREFIX):end]
        if audio is None:
            try:
                message = orjson.loads(data)
            except orjson.JSONDecodeError:
                return
            if not isinstance(message, dict):
                return
            kind = message.get("type")
            if kind == _MUTE:
                self._muted = True
            elif kind == _UNMUTE:
                self._muted = False
            if kind != _APPEND:
                return
            audio = message.get("audio")
        if isinstance(audio, str):
            try:
                raw = pybase64.b64decode(audio, validate=True)
            except (binascii.Error, ValueError):
                return
            if len(raw) % self._caller_in.codec.sample_bytes:
                return
            self._caller += self._caller_in.convert(raw, self._muted)
            excess = len(self._caller) - MAX_CALLER_BACKLOG_FRAMES * _FRAME_BYTES
            if excess > 0:
                excess += excess % _SAMPLE_BYTES
                del self._caller[:excess]
                self.dropped_bytes += excess

    def agent(self, message: str) -> None:
        """An audio delta (`events.AUDIO_DELTA_PREFIX`): one frame of the recording."""
        end = message.find('"', len(_PREFIX))
        try:
            raw = pybase64.b64decode(message[len(_PREFIX):end], validate=True) if end > 0 else b""
        except (binascii.Error, ValueError):
            raw = b""
        self._agent += self._agent_in.convert(raw, False)
        self._take(self._agent, self._said)
        self._take(self._caller, self._heard)
        self.frame += 1

    def event(self, text: str) -> None:
        """A relayed event (not audio: the pod's JSON object, as relayed), kept with the frame it
        arrived at."""
        self._events += b'{"frame":%d,"event":%s}\n' % (self.frame, text.encode())

    def take(self) -> tuple[int, bytes, bytes]:
        """What was mixed since the last take: its first frame, the recording's bytes (whole
        frames, `layout.FRAME_BYTES` each, the channels interleaved) and the events' JSON lines."""
        both = np.empty(len(self._heard), "<i2")  # two channels of half the bytes each
        both[0::2] = np.frombuffer(self._heard, "<i2")
        both[1::2] = np.frombuffer(self._said, "<i2")
        out = (self._chunk_frame, both.tobytes(), bytes(self._events))
        self._heard.clear()
        self._said.clear()
        self._events.clear()
        self._chunk_frame = self.frame
        return out

    @staticmethod
    def _take(queue: bytearray, into: bytearray) -> None:
        """One frame's samples off `queue` onto `into`, padded with silence when it holds fewer."""
        got = len(queue)
        into += queue[:_FRAME_BYTES]
        del queue[:_FRAME_BYTES]
        if got < _FRAME_BYTES:
            into += bytes(_FRAME_BYTES - got)
