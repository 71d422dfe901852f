"""Text in and out of PersonaPlex: role-prompt wrapping and encoding, and the streaming detokenizer.

Role prompts (spec §4.1) are stripped, wrapped in `<system>` tags and encoded with plain
SentencePiece (no BOS/EOS, no sampling). The model's text stream goes the other way through a
per-session `StreamingDetokenizer` (spec §5.10) built on a per-id byte table made once at load.
"""

from __future__ import annotations

import codecs
import dataclasses
from pathlib import Path

import sentencepiece

FILE_NAME = "tokenizer_spm_32k_3.model"
"""The tokenizer's file name in a PersonaPlex checkpoint directory."""

SYSTEM_TAG = "<system>"
"""Wraps the role prompt on both sides; an ordinary string to the tokenizer, not a special piece."""

SILENT_IDS = frozenset({0, 3})
"""End-of-padding and PAD: the model emits them between words; they never produce text."""

_WORD_START = "\u2581"  # SentencePiece's word-start marker "▁"


def wrap(text: str) -> str:
    """Strip, then wrap in `<system>` tags unless already wrapped; empty stays empty. Idempotent."""
    text = text.strip()
    if not text or (text.startswith(SYSTEM_TAG) and text.endswith(SYSTEM_TAG)):
        return text
    return f"{SYSTEM_TAG} {text} {SYSTEM_TAG}"


def _piece_bytes(processor: sentencepiece.SentencePieceProcessor, token: int) -> bytes:
    """What one id contributes to the text: nothing, one raw byte, or its piece with spaces."""
    if token in SILENT_IDS or processor.is_control(token) or processor.is_unknown(token):
        return b""
    piece: str = processor.id_to_piece(token)
    if processor.is_byte(token):
        return bytes([int(piece[3:-1], 16)])  # "<0xHH>"
    return piece.replace(_WORD_START, " ").encode("utf-8")


@dataclasses.dataclass(frozen=True, slots=True)
class Tokenizer:
    """A loaded SentencePiece model and its per-id byte table."""

    processor: sentencepiece.SentencePieceProcessor
    table: tuple[bytes, ...]
    """Per id, the bytes it appends to a session's text (spec §5.10)."""

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """Load `tokenizer_spm_32k_3.model` (or any SentencePiece model file)."""
        return cls.from_processor(sentencepiece.SentencePieceProcessor(model_file=str(path)))

    @classmethod
    def from_bytes(cls, model: bytes) -> Tokenizer:
        """Load a serialized SentencePiece model (tests train one in memory)."""
        return cls.from_processor(sentencepiece.SentencePieceProcessor(model_proto=model))

    @classmethod
    def from_processor(cls, processor: sentencepiece.SentencePieceProcessor) -> Tokenizer:
        return cls(processor, tuple(_piece_bytes(processor, i) for i in range(processor.get_piece_size())))

    def encode(self, text: str) -> list[int]:
        """Plain SentencePiece ids of `text`: no BOS, no EOS, no sampling."""
        return list(self.processor.encode(text, out_type=int))

    def role_ids(self, instructions: str) -> list[int]:
        """The role prompt's ids: `encode(wrap(instructions))`; [] for blank instructions (L = 0)."""
        return self.encode(wrap(instructions))

    def detokenizer(self) -> StreamingDetokenizer:
        """A fresh detokenizer for one session."""
        return StreamingDetokenizer(self.table)


class StreamingDetokenizer:
    """Turns one session's text tokens into text deltas (spec §5.10).

    Pending bytes are decoded incrementally: an incomplete trailing UTF-8 sequence waits for the
    next token, invalid bytes become U+FFFD. Leading whitespace is dropped until the first
    non-empty output, so the first word's word-start space never shows. Bytes still pending
    when the session ends are dropped.
    """

    __slots__ = ("_decoder", "_started", "_table")

    def __init__(self, table: tuple[bytes, ...]) -> None:
        self._table = table
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False

    def state(self) -> tuple[bytes, bool]:
        """The bytes of an incomplete UTF-8 sequence still pending, and whether text was shown yet
        (what a handover carries)."""
        return self._decoder.getstate()[0], self._started

    def restore(self, pending: bytes, started: bool) -> None:
        """Continue another session's detokenizer (`state`)."""
        self._decoder.setstate((pending, 0))
        self._started = started

    def push(self, token: int) -> str | None:
        """Feed one text id; return the new text, or None when there is none (never "")."""
        data = self._table[token] if 0 <= token < len(self._table) else b""
        if not data:
            return None
        text = self._decoder.decode(data)
        if not self._started:
            text = text.lstrip()
        if not text:
            return None
        self._started = True
        return text
