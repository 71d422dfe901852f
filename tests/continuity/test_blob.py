"""The handover blob's format: round trip, and every malformed or foreign blob named by code and path."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from liveplex.continuity import Code, HandoverError, blob
from liveplex.sim_pod import SimProfile

INFO = SimProfile().info()
HEADER = blob.Header("sim", INFO.model, 0, "NATF2", 7, {"echo_frames": "6"}, {"n": 3, "ok": True})


def _arrays() -> dict[str, np.ndarray]:
    return {"a": np.arange(12, dtype=np.uint16).reshape(3, 4), "b": np.array([1.5, -2], np.float32),
            "c": np.zeros(0, np.uint8), "d": np.array([True, False])}


def test_a_blob_round_trips_its_header_and_arrays() -> None:
    h = blob.decode(blob.encode(HEADER, _arrays()))
    assert isinstance(h, blob.Handover) and h.header == HEADER
    for name, a in _arrays().items():
        assert np.array_equal(h.arrays[name], a) and h.arrays[name].dtype == a.dtype
    assert h.array("a", "<u2", (None, 4)).shape == (3, 4)
    assert h.scalar("n", int) == 3
    for bad in (lambda: h.array("a", "<u2", (4, None)), lambda: h.array("a", "<i8", (3, 4)),
                lambda: h.array("zz", "<u2", (3, 4)), lambda: h.scalar("ok", int)):
        with pytest.raises(HandoverError) as exc:
            bad()
        assert exc.value.code is Code.STATE


@pytest.mark.parametrize("mutate, code, param", [
    (lambda b: b[:3], Code.MALFORMED, None),
    (lambda b: b"XXXX" + b[4:], Code.MALFORMED, None),
    (lambda b: b[:4] + struct.pack("<H", 99) + b[6:], Code.VERSION, "header.version"),
    (lambda b: b[:-1], Code.MALFORMED, "header.arrays[3]"),
    (lambda b: b + b"\0", Code.MALFORMED, None),
    (lambda b: b[:6] + struct.pack("<I", 1 << 30) + b[10:], Code.MALFORMED, "header"),
])
def test_a_malformed_blob_is_an_error_value_naming_where(mutate, code, param) -> None:
    got = blob.decode(mutate(blob.encode(HEADER, _arrays())))
    assert isinstance(got, HandoverError) and got.code is code and got.param == param


def test_a_header_field_of_the_wrong_type_is_named() -> None:
    head = blob.encode(HEADER, {})[10:].replace(b'"frames":7', b'"frames":"7"')
    got = blob.decode(struct.pack("<4sHI", blob.MAGIC, blob.FORMAT_VERSION, len(head)) + head)
    assert isinstance(got, HandoverError) and got.param == "header.frames"


@pytest.mark.parametrize("change, code, param", [
    ({"model": "personaplex-7b"}, Code.ARCHITECTURE, "header.model"),
    ({"context": 3000}, Code.WINDOW, "header.context"),
    ({"voice": "Nobody"}, Code.VOICE, "header.voice"),
    ({"engine": {"echo_frames": "2"}}, Code.ENGINE, "header.engine.echo_frames"),
])
def test_peek_checks_the_header_against_what_the_pod_serves(change, code, param) -> None:
    import dataclasses

    assert blob.peek(blob.encode(HEADER, {}), INFO) == HEADER
    got = blob.peek(blob.encode(dataclasses.replace(HEADER, **change), {}), INFO)
    assert isinstance(got, HandoverError) and got.code is code and got.param == param
