"""What a stored session is made of in an `ObjectStore`, and how its recording is put back
together (pure: keys, documents and byte arithmetic; no I/O).

    sessions/<id>/meta.json                   who owns it, its settings, live or ended (`Meta`)
    sessions/<id>/audio/<frame>.pcm           the recording from agent frame <frame> on: 24 kHz
                                              s16le, 2 channels interleaved (0: the caller, 1: the
                                              agent), `FRAME_BYTES` a frame, whole frames
    sessions/<id>/events/<frame>.jsonl        the relayed events from that frame on (transcripts,
                                              usage, notes, the close), one `{"frame", "event"}` a line
    sessions/<id>/record/<offset>.bin         the resume record (the pod's checkpoints, docs/continuity.md)
                                              from byte <offset> on; concatenated in order, the record
    expiry/<YYYY-MM-DD>/<id>                  empty: the session is deleted after that day (`retention`)
    live/<id>                                 empty: the call is live; its writer rewrites it every
                                              `retention.LIVE_TOUCH_S`, deletes it at the call's end
                                              (one left untouched: a call lost, `retention.end_lost`)

Numbers in keys are zero-padded so that keys sort as numbers. Every object is written once
(chunks) except `meta.json` (at the start and the end) and `live/<id>`: S3 has no append, and a gateway lost
mid-call loses only the chunk it had not written yet.
"""

from __future__ import annotations

import datetime
import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from liveplex.live import frames
from liveplex.storage.store import Entry

CHANNELS = 2
SAMPLE_RATE = frames.SAMPLE_RATE
FRAME_BYTES = frames.FRAME_SAMPLES * CHANNELS * 2
"""One 80 ms agent frame of the recording: 1920 samples of each channel, 16-bit (7,680 bytes:
a call-minute is 5.76 MB of WAV)."""
WAV_HEADER_BYTES = 44
MEDIA_TYPE = "audio/wav"
SESSIONS = "sessions/"
EXPIRY = "expiry/"
LIVE = "live/"
LOST = "lost"
"""`Meta.reason` of a call whose gateway died and whose caller never re-attached (`retention.end_lost`)."""
_FRAME_DIGITS = 10
_OFFSET_DIGITS = 12


def session_prefix(session_id: str) -> str:
    return f"{SESSIONS}{session_id}/"


def meta_key(session_id: str) -> str:
    return f"{session_prefix(session_id)}meta.json"


def audio_prefix(session_id: str) -> str:
    return f"{session_prefix(session_id)}audio/"


def audio_key(session_id: str, frame: int) -> str:
    return f"{audio_prefix(session_id)}{frame:0{_FRAME_DIGITS}d}.pcm"


def events_key(session_id: str, frame: int) -> str:
    return f"{session_prefix(session_id)}events/{frame:0{_FRAME_DIGITS}d}.jsonl"


def record_prefix(session_id: str) -> str:
    return f"{session_prefix(session_id)}record/"


def record_key(session_id: str, offset: int) -> str:
    return f"{record_prefix(session_id)}{offset:0{_OFFSET_DIGITS}d}.bin"


def record_end(chunks: Sequence[Entry]) -> int:
    """The stored record's length from its chunks (sorted by key): where a next writer goes on."""
    for entry in reversed(chunks):
        stem = entry.key.rsplit("/", 1)[-1].partition(".")[0]
        if stem.isdigit():
            return int(stem) + entry.size
    return 0


def expiry_key(day: datetime.date, session_id: str) -> str:
    return f"{EXPIRY}{day.isoformat()}/{session_id}"


def live_key(session_id: str) -> str:
    return f"{LIVE}{session_id}"


def frame_of(key: str) -> int | None:
    """The first frame an audio chunk's key names; None for anything else."""
    name = key.rsplit("/", 1)[-1]
    stem, _, ext = name.partition(".")
    return int(stem) if ext == "pcm" and stem.isdigit() else None


@dataclass(frozen=True, slots=True)
class Meta:
    """`meta.json`: a stored session's owner and settings. `key` is the SHA-256 of the API key
    that started it (`gateway.sessions.key_digest`), never the key: the only one that may read it."""

    session_id: str
    key: str
    created_at: int
    """Unix seconds."""
    expires_on: str | None
    """The last day (ISO date, UTC) it is kept; None: kept until deleted."""
    session: dict[str, Any]
    """The session resource, as `session.started` gave it (model, format, voice, instructions...)."""
    status: str = "live"
    """"live", or "ended" once the call ended (`frames` then says how long it was)."""
    frames: int | None = None
    ended_at: int | None = None
    degraded: str | None = None
    """Why storing stopped before the call's end (the store failed): what is stored ends there."""
    reason: str | None = None
    """Why it is "ended" when the call's own end was never written: `LOST`; None: the call ended."""

    def owned_by(self, digest: str) -> bool:
        return hmac.compare_digest(self.key, digest)

    def dump(self) -> bytes:
        return orjson.dumps({
            "version": 1, "session_id": self.session_id, "key_sha256": self.key, "created_at": self.created_at,
            "expires_on": self.expires_on, "status": self.status, "frames": self.frames,
            "ended_at": self.ended_at, "degraded": self.degraded, "reason": self.reason,
            "recording": {"media_type": MEDIA_TYPE, "sample_rate": SAMPLE_RATE, "channels": ["caller", "agent"]},
            "session": self.session,
        }, option=orjson.OPT_INDENT_2)

    @staticmethod
    def load(data: bytes) -> Meta | None:
        """A `meta.json` as `dump` wrote it; None for anything else."""
        try:
            raw = orjson.loads(data)
            return Meta(str(raw["session_id"]), str(raw["key_sha256"]), int(raw["created_at"]),
                        raw["expires_on"], dict(raw["session"]), str(raw["status"]), raw["frames"],
                        raw["ended_at"], raw["degraded"], raw.get("reason"))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


def wav_header(data_bytes: int) -> bytes:
    """A canonical 44-byte RIFF/WAVE header for `data_bytes` of 24 kHz 16-bit stereo PCM."""
    block = CHANNELS * 2
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVE"
            + b"fmt " + struct.pack("<IHHIIHH", 16, 1, CHANNELS, SAMPLE_RATE, SAMPLE_RATE * block, block, 16)
            + b"data" + struct.pack("<I", data_bytes))


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of a recording's download: `skip` bytes into the chunk `key` then `size` bytes
    of it, or (`key` None) `size` bytes of silence where no chunk was written (a gateway lost
    mid-call: the seconds it had not written yet)."""

    key: str | None
    skip: int
    size: int


def frames_stored(chunks: Sequence[Entry]) -> int:
    """The frame after the last whole one the audio chunks hold: a lost call's length (0: none)."""
    ends = [frame + entry.size // FRAME_BYTES for entry in chunks if (frame := frame_of(entry.key)) is not None]
    return max(ends, default=0)


def assemble(chunks: Sequence[Entry]) -> tuple[list[Piece], int]:
    """The pieces of a recording from its audio chunks (sorted by key), in time order, and their
    total size: a gap between chunks is silence, so the audio stays on the call's timeline; a chunk
    that overlaps the one before (a second writer after a re-attach) is cut where the first ends."""
    pieces: list[Piece] = []
    end = None  # the recording's end so far, in bytes from frame 0
    start_at = None
    for entry in chunks:
        frame = frame_of(entry.key)
        if frame is None or entry.size <= 0:
            continue
        at = frame * FRAME_BYTES
        size = entry.size - entry.size % FRAME_BYTES
        if end is None:
            start_at = end = at
        if at > end:
            pieces.append(Piece(None, 0, at - end))
            end = at
        skip = end - at
        if skip >= size:
            continue
        pieces.append(Piece(entry.key, skip, size - skip))
        end = at + size
    total = 0 if end is None or start_at is None else end - start_at
    return pieces, total
