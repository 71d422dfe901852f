"""The handover blob: a small JSON header and raw little-endian arrays, versioned, never pickled.

Layout: `MAGIC` (4 bytes), the format version (u16), the header's length (u32), the header (UTF-8
JSON), then each array's bytes, end to end, in the header's `arrays` order. The header says what
exported the session (model, window, voice, the engine settings that change the numbers), how far
it ran (`frames`), the engine's own scalars (`state`) and every array's name, dtype and shape, so
a reader checks all of it before it touches a tensor (`check`, `Handover.array`). Engine-neutral:
each engine says what its arrays and scalars mean (sim_pod/handover.py, engine_pod/handover.py).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from liveplex.continuity import errors
from liveplex.continuity.errors import Code, HandoverError
from liveplex.live import contract

MAGIC = b"LPHO"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<4sHI")
_DTYPES = frozenset({"|u1", "|b1", "<u2", "<i2", "<i4", "<i8", "<f4", "<f2"})
"""The array dtypes a blob may hold (no objects, no big-endian)."""
MAX_HEADER_BYTES = 1 << 20
"""A header longer than this is refused before it is parsed (commentary ids are its largest part)."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a blob says about the session, everything but its arrays' bytes."""

    kind: str
    """The engine that exported it: "sim" or "personaplex"."""
    model: str
    """`LiveInfo.model` of the exporting engine (its architecture)."""
    context: int
    """`LiveInfo.context_frames` (0 for the sim)."""
    voice: str
    frames: int
    """Frames the session ran; its next frame's number."""
    engine: dict[str, str] = field(default_factory=dict)
    """The `LiveInfo.engine` settings that must match on import (schedule, dtype)."""
    state: dict[str, Any] = field(default_factory=dict)
    """The engine's scalars (JSON values)."""


@dataclass(frozen=True, slots=True)
class Handover:
    """A decoded blob: its header and its arrays (read-only views of the blob's bytes)."""

    header: Header
    arrays: dict[str, np.ndarray]

    def array(self, name: str, dtype: str, shape: tuple[int | None, ...]) -> np.ndarray:
        """Array `name`, checked: its dtype, and its shape where `shape` gives a size (None: any).
        Raises `HandoverError` (`STATE`): engines decode inside one try."""
        a = self.arrays.get(name)
        if a is None:
            raise errors.state(("arrays", name), "is missing")
        if a.dtype != np.dtype(dtype):
            raise errors.state(("arrays", name), f"is {a.dtype.str}, expected {np.dtype(dtype).str}")
        if len(a.shape) != len(shape) or any(w is not None and g != w for g, w in zip(a.shape, shape)):
            raise errors.state(("arrays", name), f"has shape {list(a.shape)}, expected {list(shape)}")
        return a

    def scalar(self, name: str, kind: type) -> Any:
        """Scalar `name` of the header's `state`, checked to be a `kind`; raises `HandoverError`."""
        value = self.header.state.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise errors.state(("header", "state", name), f"is {value!r}, expected a {kind.__name__}")
        return value


def encode(header: Header, arrays: dict[str, np.ndarray]) -> bytes:
    """The blob of `header` and `arrays` (each written C-contiguous, little-endian)."""
    table, parts = [], []
    for name, a in arrays.items():
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        assert a.dtype.str in _DTYPES, f"array {name} of dtype {a.dtype.str} cannot go in a blob"
        table.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape)})
        parts.append(a.tobytes())  # C order, whatever the array's layout
    head = json.dumps({"kind": header.kind, "model": header.model, "context": header.context,
                       "voice": header.voice, "frames": header.frames, "engine": header.engine,
                       "state": header.state, "arrays": table}, separators=(",", ":")).encode()
    return b"".join([_PREFIX.pack(MAGIC, FORMAT_VERSION, len(head)), head, *parts])


def decode(data: bytes) -> Handover | HandoverError:
    """Parse a blob: its format only (`check` compares it with an engine)."""
    try:
        return _decode(memoryview(data))
    except HandoverError as exc:
        return exc


def _decode(data: memoryview) -> Handover:
    if len(data) < _PREFIX.size:
        raise errors.malformed((), f"{len(data)} bytes")
    magic, version, size = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise errors.malformed((), "it does not start with the handover magic")
    if version != FORMAT_VERSION:
        raise errors.version(version, FORMAT_VERSION)
    if size > MAX_HEADER_BYTES or _PREFIX.size + size > len(data):
        raise errors.malformed(("header",), f"a header of {size} bytes in a blob of {len(data)}")
    try:
        raw = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + size]))
    except ValueError as exc:
        raise errors.malformed(("header",), f"the header is not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise errors.malformed(("header",), "the header is not an object")
    header = Header(kind=_field(raw, "kind", str), model=_field(raw, "model", str),
                    context=_field(raw, "context", int), voice=_field(raw, "voice", str),
                    frames=_field(raw, "frames", int), engine=_field(raw, "engine", dict),
                    state=_field(raw, "state", dict))
    arrays, at = {}, _PREFIX.size + size
    for i, entry in enumerate(_field(raw, "arrays", list)):
        path = ("header", "arrays", i)
        if not isinstance(entry, dict):
            raise errors.malformed(path, "an array entry is not an object")
        name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
        if (not isinstance(name, str) or dtype not in _DTYPES or not isinstance(shape, list)
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
            raise errors.malformed(path, "an array entry needs a name, a known dtype and a shape")
        dt = np.dtype(dtype)
        nbytes = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if at + nbytes > len(data):
            raise errors.malformed(path, f"array {name!r} runs past the blob's end")
        arrays[name] = np.frombuffer(data, dt, nbytes // dt.itemsize, at).reshape(shape)
        at += nbytes
    if at != len(data):
        raise errors.malformed((), f"{len(data) - at} bytes after the last array")
    return Handover(header, arrays)


def _field(raw: dict[str, Any], name: str, kind: type) -> Any:
    value = raw.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise errors.malformed(("header", name), f"'{name}' is {type(value).__name__}, expected {kind.__name__}")
    return value


def check(header: Header, info: contract.LiveInfo, voice: str | None = None) -> HandoverError | None:
    """Whether an engine serving `info` can continue this session (and as `voice`, if given)."""
    if header.model != info.model:
        return errors.mismatch(Code.ARCHITECTURE, ("header", "model"), header.model, info.model)
    if header.context != info.context_frames:
        return errors.mismatch(Code.WINDOW, ("header", "context"), header.context, info.context_frames)
    if header.voice not in info.voices:
        return errors.unknown_voice(header.voice, info.voices)
    if voice is not None and voice != header.voice:
        return errors.mismatch(Code.VOICE, ("header", "voice"), header.voice, voice)
    served = dict(info.engine)
    for name, value in sorted(header.engine.items()):
        if served.get(name) != value:
            return errors.mismatch(Code.ENGINE, ("header", "engine", name), value, served.get(name))
    return None


def peek(data: bytes, info: contract.LiveInfo) -> Header | HandoverError:
    """A blob's header if an engine serving `info` can import it: what the pod's import route asks."""
    got = decode(data)
    if isinstance(got, HandoverError):
        return got
    return check(got.header, info) or got.header


def accept(data: bytes, info: contract.LiveInfo, kind: str, voice: str) -> Handover:
    """The blob an engine of `kind` serving `info` is asked to continue as `voice`, decoded and
    checked (its arrays are the engine's to check); raises `HandoverError`."""
    got = decode(data)
    if isinstance(got, HandoverError):
        raise got
    if got.header.kind != kind:
        raise errors.mismatch(Code.ENGINE, ("header", "kind"), got.header.kind, kind)
    if (err := check(got.header, info, voice)) is not None:
        raise err
    return got
