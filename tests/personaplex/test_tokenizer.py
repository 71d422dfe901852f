"""Role-prompt encoding and the streaming detokenizer, on a tokenizer trained at test time (spec §6.7)."""

from __future__ import annotations

import codecs
import os
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.personaplex import tiny_tokenizer, tokenizer

EMOJI_BYTES = "🙂".encode()


@pytest.fixture(scope="module")
def tok() -> tokenizer.Tokenizer:
    return tokenizer.Tokenizer.from_bytes(tiny_tokenizer.train())


def _detokenize(tok: tokenizer.Tokenizer, ids: list[int]) -> str:
    detok = tok.detokenizer()
    return "".join(text for text in map(detok.push, ids) if text is not None)


def _byte_id(tok: tokenizer.Tokenizer, value: int) -> int:
    return tok.processor.piece_to_id(f"<0x{value:02X}>")


def test_test_tokenizer_has_the_real_layout(tok):
    p = tok.processor
    assert [p.id_to_piece(i) for i in range(4)] == ["<unk>", "<s>", "</s>", "<pad>"]
    assert [_byte_id(tok, b) for b in (0x00, 0xFF)] == [4, 259]


@pytest.mark.parametrize("text", [
    "Hello, world!",
    "naïve café — crème brûlée",
    "東京と大阪",
    "smile 🙂 and 🎉 party",
    "two  spaces   and three",
    "call 555 1234 at 09:30",
    "end.\nnew line\n\nand a blank one",
])
def test_encode_then_detokenize_round_trips(tok, text):
    assert _detokenize(tok, tok.encode(text)) == text.lstrip()


def test_padding_and_control_ids_produce_nothing(tok):
    detok = tok.detokenizer()
    assert [detok.push(i) for i in (0, 1, 2, 3, 0, 3)] == [None] * 6


def test_the_first_words_leading_space_is_dropped_and_later_ones_kept(tok):
    detok = tok.detokenizer()
    deltas = [d for d in map(detok.push, tok.encode("Hello world")) if d is not None]
    assert not deltas[0].startswith(" ")
    assert "".join(deltas) == "Hello world"
    assert any(d.startswith(" ") for d in deltas[1:])


def test_an_emoji_in_four_byte_pieces_comes_out_at_the_fourth(tok):
    detok = tok.detokenizer()
    assert [detok.push(_byte_id(tok, b)) for b in EMOJI_BYTES] == [None, None, None, "🙂"]


def test_e_acute_passes_through(tok):
    assert _detokenize(tok, tok.encode("é")) == "é"


def test_invalid_bytes_become_replacement_characters(tok):
    detok = tok.detokenizer()
    assert detok.push(_byte_id(tok, 0xFF)) == "\ufffd"
    assert detok.push(_byte_id(tok, 0xC3)) is None  # could start "é": held back
    assert detok.push(tok.processor.piece_to_id("a")) == "\ufffda"


def test_ids_outside_the_vocabulary_produce_nothing(tok):
    assert tok.detokenizer().push(32000) is None


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(0, 399), max_size=40))
def test_a_delta_is_never_empty(tok, ids):
    detok = tok.detokenizer()
    assert all(delta != "" for delta in map(detok.push, ids))


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=40), cuts=st.lists(st.integers(0, 40), max_size=10))
def test_output_does_not_depend_on_how_bytes_are_split_into_pieces(data, cuts):
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    pieces = tuple(data[a:b] for a, b in zip(bounds, bounds[1:]))
    detok = tokenizer.StreamingDetokenizer(pieces)
    chunked = "".join(t for t in map(detok.push, range(len(pieces))) if t is not None)
    whole = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data).lstrip()
    assert chunked == whole


_FRAGMENTS = st.sampled_from(["<system>", "<sys", "tem>", " ", "\n", "\t", "a", "é", "🙂"]) | st.text(max_size=3)


@given(text=st.lists(_FRAGMENTS, max_size=8).map("".join))
def test_wrap_is_idempotent(text):
    assert tokenizer.wrap(tokenizer.wrap(text)) == tokenizer.wrap(text)


def test_wrap_adds_tags_once_and_leaves_empty_text_empty(tok):
    assert tokenizer.wrap("  You are Tom.  ") == "<system> You are Tom. <system>"
    assert tokenizer.wrap("<system> You are Tom. <system>") == "<system> You are Tom. <system>"
    assert tokenizer.wrap(" \n ") == ""
    assert tok.role_ids("   ") == []
    assert tok.role_ids("You are Tom.") == tok.encode("<system> You are Tom. <system>")


# Spec §6.7's reference ids for the real tokenizer (third-party figures).
REFERENCE_IDS = [
    ("Hello, world!", [11725, 261, 671, 430]),
    ("<system> You are Tom. <system>", [607, 4831, 578, 493, 298, 2608, 263, 607, 4831, 578]),
    ("don't let it sit, it's done", [551, 286, 303, 1131, 296, 6485, 261, 296, 286, 266, 954]),
    ("  two  spaces and 1234 digits", [260, 260, 368, 260, 3697, 267, 260, 265, 270, 278, 281, 11535]),
    ("end.\nnew line", [606, 263, 14, 2706, 619]),
    ("naïve café — 東京 🙂",
     [572, 16650, 518, 29301, 729, 260, 234, 161, 181, 232, 190, 176, 260, 244, 163, 157, 134]),
]
DEFAULT_TEACHER = ("You are a wise and friendly teacher. Answer questions or provide advice in a clear and "
                   "engaging way.")


@pytest.fixture(scope="module")
def real_tok() -> tokenizer.Tokenizer:
    directory = os.environ.get("LIVEPLEX_PERSONAPLEX_DIR")
    path = pathlib.Path(directory or ".") / tokenizer.FILE_NAME
    if not directory or not path.is_file():
        pytest.skip(f"needs LIVEPLEX_PERSONAPLEX_DIR naming a directory with {tokenizer.FILE_NAME}")
    return tokenizer.Tokenizer.load(path)


@pytest.mark.realckpt
@pytest.mark.parametrize(("text", "ids"), REFERENCE_IDS)
def test_real_tokenizer_gives_the_reference_ids(real_tok, text, ids):
    assert real_tok.encode(text) == ids
    assert _detokenize(real_tok, ids) == text.lstrip()


@pytest.mark.realckpt
def test_real_tokenizer_default_teacher_prompt_is_26_tokens(real_tok):
    assert len(real_tok.role_ids(DEFAULT_TEACHER)) == 26
