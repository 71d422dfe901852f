"""The PersonaPlex engine's handovers (docs/continuity.md): a row and a slot to a blob or a record, and back.

Pure: numpy in and out, no device. Out: what a running session's line carries, its host row
(position, history, detokenizer, commentary) and its slot's token and Mimi rows (read off the
device by the engine) make a blob (`export`), and its fed columns a resume record, a piece a tick
(`checkpoint`). Back: a blob or a record, decoded once and checked against the engine (`Format`),
gives a `Resume` the engine lays out as a newcomer whose prompt is its history. Every id the device
will embed is range-checked here: a bad one would fault the tick, and a tick fault ends every
session (D9).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from liveplex.continuity import blob, carried, errors, record
from liveplex.engine_pod.history import MAX_HISTORY_CONTEXTS, History
from liveplex.engine_pod.settings import MAX_COMMENTARY_PIECES
from liveplex.live import contract
from liveplex.live.jitter import Jitter
from liveplex.live.line import Carried
from liveplex.personaplex import config, step

KIND = "personaplex"
"""`blob.Header.kind` of this engine's handovers."""
CHECKPOINT_TICKS = 1
"""Ticks a resume record's `TICKS` chunk covers (docs/continuity.md): one, so a lost session's
record lacks at most the frame its pod was computing."""
COLUMN_BYTES = 2 * config.NUM_STREAMS
"""A record's per-tick part: the column fed (17 ids, uint16)."""
TAIL_IDS = 1 + 3 * config.AGENT_CODEBOOKS
"""A record's tail: the token state the next column is made of (`program.TAIL`: ahead, u1, u2)."""
VOID = 1 << 62
"""What `checkpoint` says a session's record covers once it is void (its history outgrew its cap)."""

Spec = tuple[str, tuple[int, ...]]
"""A slot row's numpy dtype string and shape."""


@dataclass(frozen=True, slots=True)
class Format:
    """What this engine's blobs and records say and must match, fixed when the engine is built."""

    info: contract.LiveInfo
    settings: dict[str, str]
    """The engine settings an import must share: they change every number the model computes."""
    tokens: Mapping[str, Spec]
    """The slot's token row (`step.TokenState`), by field."""
    codec: tuple[Spec, ...]
    """The slot's Mimi state rows, in `slots.tensors` order."""
    prefix_frames: Mapping[str, int]
    """The frames of each voice's prefix: the KV a session's history starts after."""
    from_zero: bool
    """Histories start at position 0 (Moshi: its INIT column replays too), else after the voice."""
    text_card: int
    card: int


@dataclass(frozen=True, slots=True)
class Resume:
    """An imported session, checked: what it fed and what its slot and row held."""

    frames: int
    """Frames it ran: its next frame's number."""
    first: int
    """Position of `history[0]`."""
    history: np.ndarray
    """[n, 17] uint16: every column it fed, positions `first`.. `first + n - 1`."""
    tokens: dict[str, np.ndarray]
    """Its `step.TokenState` row, by field."""
    codec: list[np.ndarray] | None
    """Its Mimi state row, in `slots.tensors` order; None: fresh, as a newcomer's (a record)."""
    detok: tuple[bytes, bool]
    waiting: list[list[int]]
    loaded: int
    said: int

    @property
    def pos(self) -> int:
        """Position of the row its next tick runs."""
        return self.first + len(self.history)


def _header(fmt: Format, voice: str, ran: int, state: dict[str, object]) -> blob.Header:
    return blob.Header(KIND, fmt.info.model, fmt.info.context_frames, voice, ran, fmt.settings, state)


def export(fmt: Format, voice: str, ran: int, line: Carried, *, pos: int, history: History,
           detok: tuple[bytes, bool], waiting: list[list[int]], loaded: int, said: int,
           tokens: Mapping[str, np.ndarray], codec: list[np.ndarray]) -> bytes:
    """The blob of a session that left its line (`line`) after `ran` frames at position `pos`:
    every column it fed since its voice (the importer recomputes its KV ring from them), its
    slot's token and Mimi rows, detokenizer, commentary backlog, jitter buffer and counts."""
    scalars, arrays = carried.part(line)
    pending, started = detok
    state = {**scalars, "pos": pos, "first": history.first, "detok_pending": pending.hex(),
             "detok_started": started, "waiting": waiting, "loaded": loaded, "said": said}
    rows = {f"tokens.{name}": a for name, a in tokens.items()} | {f"mimi.{i}": a for i, a in enumerate(codec)}
    return blob.encode(_header(fmt, voice, ran, state), {**arrays, "history": history.columns(), **rows})


def checkpoint(fmt: Format, voice: str, ran: int, recorded: int, *, pos: int, history: History, key: int,
               tail: np.ndarray) -> tuple[bytes | None, int]:
    """After a tick of a session a gateway relays (`ran` frames, `recorded` of them in its record,
    -1: its head not sent yet): the next piece of its resume record, if one is due, and the frames
    the record then covers. The head once, then the columns fed since the last piece and `tail`
    (`TAIL_IDS` ids) after them; void once the history outgrew its cap. A few µs: the history
    already holds the columns."""
    if recorded == VOID:
        return None, VOID
    if history.full:
        return record.VOID_CHUNK, VOID
    n = ran - recorded
    if recorded >= 0 and n < CHECKPOINT_TICKS:
        return None, recorded
    tail = tail.astype("<u2")
    if recorded < 0:
        header = _header(fmt, voice, ran, {"first": history.first, "pos": pos, "key": key})
        return record.head(header, {"history": history.columns(), "tail": tail}, COLUMN_BYTES, 2 * TAIL_IDS), ran
    return record.ticks(recorded, n, history.columns()[-n:].tobytes(), tail.tobytes()), ran


def restore(state: bytes, fmt: Format, voice: str, jitter: Jitter) -> Resume:
    """Decode and check `state`, a blob or a record, for a session continuing here as `voice`;
    its caller audio goes into `jitter` (a record's starts empty). Raises `HandoverError`."""
    if record.is_record(state):
        return _of_record(record.accept(state, fmt.info, KIND, voice), fmt)
    return _of_blob(blob.accept(state, fmt.info, KIND, voice), fmt, jitter)


def _of_blob(h: blob.Handover, fmt: Format, jitter: Jitter) -> Resume:
    first, pos = h.scalar("first", int), h.scalar("pos", int)
    history = h.array("history", "<u2", (None, config.NUM_STREAMS))
    if pos != first + len(history):
        raise errors.state(("arrays", "history"), f"has {len(history)} columns from {first} for position {pos}")
    tokens = {name: h.array(f"tokens.{name}", dtype, shape) for name, (dtype, shape) in fmt.tokens.items()}
    codec = [h.array(f"mimi.{i}", dtype, shape) for i, (dtype, shape) in enumerate(fmt.codec)]
    waiting = h.scalar("waiting", list)
    if len(waiting) > MAX_COMMENTARY_PIECES or not all(
            isinstance(p, list) and 0 < len(p) <= step.SAY_TOKENS
            and all(isinstance(i, int) and 0 <= i < fmt.text_card for i in p) for p in waiting):
        raise errors.state(("header", "state", "waiting"), "is not a list of commentary pieces this engine holds")
    try:
        pending = bytes.fromhex(h.scalar("detok_pending", str))
    except ValueError:
        raise errors.state(("header", "state", "detok_pending"), "is not hex") from None
    carried.restore(h, jitter, fmt.info.max_frames)
    return _checked(Resume(h.header.frames, first, history, tokens, codec, (pending, h.scalar("detok_started", bool)),
                           waiting, h.scalar("loaded", int), h.scalar("said", int)), h.header.voice, fmt)


def _of_record(rec: record.Record, fmt: Format) -> Resume:
    """A resume record (its pod was lost): the columns fed are exact and rebuild the KV ring as an
    import's do; the token row is rebuilt from the record's tail and sampling key (no commentary);
    the Mimi state starts fresh, as a newcomer's, the jitter buffer empty."""
    h = rec.head
    if h.scalar("tick_bytes", int) != COLUMN_BYTES or h.scalar("tail_bytes", int) != 2 * TAIL_IDS:
        raise errors.state(("header", "state", "tick_bytes"), "is not this engine's column and tail")
    first = h.scalar("first", int)
    head = h.array("history", "<u2", (None, config.NUM_STREAMS))
    if h.scalar("pos", int) != first + len(head):
        raise errors.state(("header", "state", "pos"), f"is not {first} + {len(head)} columns")
    history = np.concatenate([head, np.frombuffer(rec.added, "<u2").reshape(-1, config.NUM_STREAMS)])
    tail = h.array("tail", "<u2", (TAIL_IDS,)) if rec.tail is None else np.frombuffer(rec.tail, "<u2")
    key = h.scalar("key", int)
    if not 0 <= key < 1 << 32:
        raise errors.state(("header", "state", "key"), "is not a 32-bit sampling key")
    A = config.AGENT_CODEBOOKS
    tokens = {name: np.zeros(shape, dtype) for name, (dtype, shape) in fmt.tokens.items()}
    tokens.update(pos=np.array(first + len(history)), key=np.array(key), ahead=tail[:1 + A].astype(np.int64),
                  u1=tail[1 + A:1 + 2 * A].astype(np.int64), u2=tail[1 + 2 * A:].astype(np.int64))
    carried.frames_within(rec.frames, fmt.info.max_frames)
    return _checked(Resume(rec.frames, first, history, tokens, None, (b"", True), [], 0, 0), h.header.voice, fmt)


def _checked(r: Resume, voice: str, fmt: Format) -> Resume:
    """`r`, once what it says it fed and holds fits this engine and voice."""
    C = fmt.info.context_frames
    frames = fmt.prefix_frames[voice]
    if r.first != (0 if fmt.from_zero else frames):
        raise errors.state(("header", "state", "first"), f"is {r.first}; the voice has {frames} frames")
    if not frames < r.pos <= r.first + MAX_HISTORY_CONTEXTS * C:
        raise errors.state(("arrays", "history"), f"has {len(r.history)} columns from {r.first}")
    _ids_within(("arrays", "history"), r.history, [fmt.text_card] + [fmt.card] * (config.NUM_STREAMS - 1))
    _ids_within(("arrays", "tokens.ahead"), r.tokens["ahead"], [fmt.text_card] + [fmt.card] * config.AGENT_CODEBOOKS)
    for name in ("u1", "u2", "forced"):
        _ids_within(("arrays", f"tokens.{name}"), r.tokens[name], fmt.card)
    _ids_within(("arrays", "tokens.say"), r.tokens["say"], fmt.text_card)
    t = r.tokens
    if not (int(t["pos"]) == r.pos and 0 <= int(t["say_at"]) <= int(t["say_len"]) <= step.SAY_TOKENS):
        raise errors.state(("arrays", "tokens.pos"), "does not agree with the session's position and commentary")
    return r


def _ids_within(path: errors.Path, ids: np.ndarray, limits: list[int] | int) -> None:
    """Raise `HandoverError` unless `ids` are ids the model embeds: >= 0 and <= `limits` (one per
    last-axis entry, or one for all; INIT ids are the cards themselves)."""
    if ids.size and not (ids.min() >= 0 and (ids <= np.asarray(limits)).all()):
        raise errors.state(path, "holds token ids outside the model's vocabularies")
