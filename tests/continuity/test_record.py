"""The resume record's format (issue 24 Part 3): chunks concatenated by a gateway that never reads
them decode to the head and what each tick added; a gap, a cut, a void or a foreign head is named
by code and path."""

from __future__ import annotations

import numpy as np
import pytest

from liveplex.continuity import Code, HandoverError, blob, record
from liveplex.sim_pod import SimProfile

INFO = SimProfile().info()
HEADER = blob.Header("sim", INFO.model, 0, "NATF2", 4, {"echo_frames": "6"}, {"n": 1})


def _chunks() -> list[bytes]:
    head = record.head(HEADER, {"h": np.arange(6, dtype=np.uint16)}, 2, 3)
    return [head, record.ticks(4, 2, b"abcd", b"xyz"), record.ticks(6, 1, b"ef", b"uvw")]


def test_a_record_is_its_head_and_the_ticks_that_followed() -> None:
    rec = record.decode(b"".join(_chunks()))
    assert isinstance(rec, record.Record) and record.is_record(b"".join(_chunks()))
    assert rec.frames == 7 and rec.ticks == 3 and rec.added == b"abcdef" and rec.tail == b"uvw"
    assert rec.head.header.state == {"n": 1, "tick_bytes": 2, "tail_bytes": 3}
    assert np.array_equal(rec.head.arrays["h"], np.arange(6))
    only = record.decode(_chunks()[0])
    assert isinstance(only, record.Record) and only.frames == 4 and only.tail is None and only.added == b""
    again = record.decode(b"".join(_chunks() + _chunks()[:2]))  # a later head starts it over (a move)
    assert isinstance(again, record.Record) and again.frames == 6 and again.added == b"abcd"
    peeked = record.peek(b"".join(_chunks()), INFO)
    assert isinstance(peeked, blob.Header) and peeked.frames == 7 and peeked.voice == "NATF2"
    assert not record.is_record(blob.encode(HEADER, {}))


@pytest.mark.parametrize("chunks, code, param", [
    (lambda c: c[1:], Code.MALFORMED, "record[0]"),                               # no head
    (lambda c: [c[0], c[2]], Code.STATE, "record[1]"),                            # a gap
    (lambda c: [c[0], c[1], c[1]], Code.STATE, "record[2]"),                      # an overlap
    (lambda c: [c[0], c[1], c[2][:-1]], Code.MALFORMED, "record[2]"),             # cut short
    (lambda c: [c[0], c[1], record.VOID_CHUNK, c[2]], Code.STATE, "record[2]"),   # outgrew its cap
    (lambda c: [c[0], record.ticks(4, 2, b"abc", b"xyz")], Code.MALFORMED, "record[1]"),
    (lambda c: [c[0][:5] + b"XXXX" + c[0][9:]], Code.MALFORMED, "record[0]"),     # its head is no blob
    (lambda c: [c[0], b"Q\x00\x00\x00\x00"], Code.MALFORMED, "record[1]"),
])
def test_a_bad_record_is_refused_with_its_code_and_path(chunks, code: Code, param: str) -> None:
    err = record.decode(b"".join(chunks(_chunks())))
    assert isinstance(err, HandoverError) and err.code is code and err.param == param, err


def test_a_record_of_another_engine_is_refused_on_the_field_that_differs() -> None:
    err = record.peek(b"".join(_chunks()), SimProfile(echo_frames=4).info())
    assert isinstance(err, HandoverError) and err.param == "header.engine.echo_frames"
    with pytest.raises(HandoverError) as exc:
        record.accept(b"".join(_chunks()), INFO, "personaplex", "NATF2")
    assert exc.value.code is Code.ENGINE and exc.value.param == "header.kind"
