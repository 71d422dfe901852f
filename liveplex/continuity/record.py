"""The resume record: what a gateway keeps of a relayed session so another pod can rebuild it
after the session's pod is lost (issue 24 Part 3, docs/continuity.md).

The engine sends it in pieces (`contract.Checkpoint`, on the wire `hop.CHECKPOINT`); the gateway
concatenates their bytes in order without reading them, and the concatenation is the record.
Each piece is one self-delimiting chunk: a tag (1 byte) and the body's length (u32), then the body.

- `HEAD` (first, once per upstream socket): a handover blob (`blob.encode`) whose header says what
  the session is (model, window, voice, engine settings), how many frames it had run (`frames`),
  the engine's scalars, and `state["tick_bytes"]`, `state["tail_bytes"]`: the sizes of a
  `TICKS` chunk's parts for this engine. Its arrays are what the engine needs that is not per
  frame (PersonaPlex: the columns fed so far, and the tail after them).
- `TICKS`: the first frame it covers (u32) and how many (u16), then `tick_bytes` for each of them
  end to end, then `tail_bytes` of state after the last (only the last chunk's tail counts).
- `VOID`: the session can no longer be resumed (it outgrew what a record holds); empty body.

A later `HEAD` starts the record over (what came before it is ignored), so a gateway may keep
one record across a move; a gap or an overlap in the frames is refused. Pure: no engine, no I/O.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass

import numpy as np

from liveplex.continuity import blob, errors
from liveplex.continuity.errors import Code, HandoverError
from liveplex.live import contract

HEAD, TICKS, VOID = b"H", b"T", b"V"
_CHUNK = struct.Struct("<cI")
_TICKS = struct.Struct("<IH")
MAX_CHUNK_TICKS = 0xFFFF


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record: its head, and what its `TICKS` chunks added."""

    head: blob.Handover
    ticks: int
    """Frames the `TICKS` chunks cover, after the head's `frames`."""
    added: bytes
    """Their per-tick parts, end to end (`ticks * tick_bytes`)."""
    tail: bytes | None
    """The last chunk's tail; None when no `TICKS` chunk followed the head (its arrays say)."""

    @property
    def frames(self) -> int:
        """Frames the session had run; its next frame's number."""
        return self.head.header.frames + self.ticks


def head(header: blob.Header, arrays: dict[str, np.ndarray], tick_bytes: int, tail_bytes: int) -> bytes:
    """The `HEAD` chunk of a session's record (`arrays` as for `blob.encode`)."""
    state = {**header.state, "tick_bytes": tick_bytes, "tail_bytes": tail_bytes}
    body = blob.encode(dataclasses.replace(header, state=state), arrays)
    return _CHUNK.pack(HEAD, len(body)) + body


def ticks(first: int, n: int, added: bytes, tail: bytes) -> bytes:
    """A `TICKS` chunk: frames `first`..`first + n - 1`, their parts `added`, the state `tail` after them."""
    assert 0 < n <= MAX_CHUNK_TICKS
    return _CHUNK.pack(TICKS, _TICKS.size + len(added) + len(tail)) + _TICKS.pack(first, n) + added + tail


VOID_CHUNK = _CHUNK.pack(VOID, 0)
"""The session outgrew what a record holds: the record is void from here on."""


def is_record(data: bytes) -> bool:
    """Whether `data` starts like a record (a blob starts with `blob.MAGIC`)."""
    return data[:1] == HEAD


def decode(data: bytes) -> Record | HandoverError:
    """Parse a record: its chunks and its head's format (`check` compares it with an engine)."""
    try:
        return _decode(memoryview(data))
    except HandoverError as exc:
        return exc


def _decode(data: memoryview) -> Record:
    chunks, at = [], 0
    while at < len(data):
        if at + _CHUNK.size > len(data):
            raise errors.malformed(("record", len(chunks)), "a chunk header is cut short")
        tag, size = _CHUNK.unpack_from(data, at)
        at += _CHUNK.size
        if tag not in (HEAD, TICKS, VOID) or at + size > len(data):
            raise errors.malformed(("record", len(chunks)), f"a chunk {tag!r} of {size} bytes at byte {at}")
        chunks.append((tag, data[at:at + size]))
        at += size
    starts = [i for i, (tag, _) in enumerate(chunks) if tag == HEAD]
    if not starts:
        raise errors.malformed(("record", 0), "a record starts with a head chunk")
    first = starts[-1]
    got = blob.decode(bytes(chunks[first][1]))
    if isinstance(got, HandoverError):
        raise dataclasses.replace(got, path=("record", first, *got.path))
    h = got
    tick_bytes, tail_bytes = h.scalar("tick_bytes", int), h.scalar("tail_bytes", int)
    if tick_bytes < 0 or tail_bytes < 0:
        raise errors.state(("header", "state", "tick_bytes"), "is negative")
    frames, added, tail = h.header.frames, [], None
    for i, (tag, body) in enumerate(chunks[first + 1:], first + 1):
        if tag == VOID:
            raise errors.state(("record", i), "ends it: the session outgrew what a record holds")
        if len(body) < _TICKS.size:
            raise errors.malformed(("record", i), "a ticks chunk is cut short")
        start, n = _TICKS.unpack_from(body)
        if start != frames or n == 0:
            raise errors.state(("record", i), f"covers frames from {start}; the record is at frame {frames}")
        if len(body) != _TICKS.size + n * tick_bytes + tail_bytes:
            raise errors.malformed(("record", i), f"a ticks chunk of {len(body)} bytes for {n} ticks")
        added.append(body[_TICKS.size:_TICKS.size + n * tick_bytes])
        tail = bytes(body[len(body) - tail_bytes:])
        frames += n
    return Record(h, frames - h.header.frames, b"".join(added), tail)


def peek(data: bytes, info: contract.LiveInfo) -> blob.Header | HandoverError:
    """A record's header, `frames` at its end, if an engine serving `info` can resume it: what the
    pod's resume route asks."""
    got = decode(data)
    if isinstance(got, HandoverError):
        return got
    return blob.check(got.head.header, info) or dataclasses.replace(got.head.header, frames=got.frames)


def accept(data: bytes, info: contract.LiveInfo, kind: str, voice: str) -> Record:
    """The record an engine of `kind` serving `info` is asked to resume as `voice`, decoded and
    checked (the rest is the engine's to check); raises `HandoverError`."""
    got = decode(data)
    if isinstance(got, HandoverError):
        raise got
    header = got.head.header
    if header.kind != kind:
        raise errors.mismatch(Code.ENGINE, ("header", "kind"), header.kind, kind)
    if (err := blob.check(header, info, voice)) is not None:
        raise err
    return got
