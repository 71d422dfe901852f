"""libopus through ctypes: the caller's Opus decoded with Opus's own loss concealment.

PyAV's decoder (aiortc's) cannot be told that a packet was lost: libopus conceals a loss when
asked to decode no data (PLC) or to decode the next packet's in-band FEC (the LBRR copy of the
lost frame that a sender such as Chrome adds when the answer says `useinbandfec=1`), and PyAV
exposes neither. PyAV's wheel bundles libopus (`av.libs/` beside the `av` package), so this loads
that same library: no new dependency. ctypes releases the GIL for each call.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from pathlib import Path

import av

from liveplex.gptlive.server.webrtc.timeline import TICKS_PER_S

MAX_PACKET_S = 0.12
"""The longest Opus packet (RFC 6716): what one decode may return."""
_STEP_S = 0.0025
"""Concealment covers a multiple of this (libopus refuses anything else)."""
_OK = 0


class OpusError(Exception):
    """libopus refused: `code` is its (negative) error code."""

    def __init__(self, code: int, doing: str) -> None:
        super().__init__(f"libopus {doing}: {_strerror(code)} ({code})")
        self.code = code


def _library_dirs() -> list[Path]:
    """Where PyAV's wheels keep their bundled libraries (Linux, macOS)."""
    package = Path(av.__file__).parent
    return [package.parent / "av.libs", package / ".dylibs"]


@functools.cache
def library() -> ctypes.CDLL:
    """PyAV's bundled libopus, loaded once; raises naming where it looked."""
    found = sorted(path for folder in _library_dirs() for path in folder.glob("libopus*") if path.is_file())
    if not found:
        raise RuntimeError("libopus not found beside PyAV (looked for libopus* in "
                           f"{', '.join(str(folder) for folder in _library_dirs())}): the webrtc extra's "
                           "av wheel bundles it")
    lib = ctypes.CDLL(str(found[0]))
    lib.opus_decoder_create.restype = ctypes.c_void_p
    lib.opus_decoder_create.argtypes = [ctypes.c_int32, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    lib.opus_decoder_destroy.restype = None
    lib.opus_decoder_destroy.argtypes = [ctypes.c_void_p]
    lib.opus_decode.restype = ctypes.c_int
    lib.opus_decode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
                                ctypes.POINTER(ctypes.c_int16), ctypes.c_int, ctypes.c_int]
    lib.opus_packet_get_nb_samples.restype = ctypes.c_int
    lib.opus_packet_get_nb_samples.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]
    lib.opus_strerror.restype = ctypes.c_char_p
    lib.opus_strerror.argtypes = [ctypes.c_int]
    return lib


def _strerror(code: int) -> str:
    message = library().opus_strerror(code)
    return message.decode() if message else "unknown error"


def packet_ticks(packet: bytes) -> int:
    """How long `packet` plays, in RTP ticks (48 kHz); raises `OpusError` for what is not Opus."""
    ticks = library().opus_packet_get_nb_samples(packet, len(packet), TICKS_PER_S)
    if ticks < _OK:
        raise OpusError(ticks, "read a packet's duration")
    return ticks


class Decoder:
    """One mono libopus decoder at `rate` (libopus decodes straight to any of 8-48 kHz: the band
    limit is cut in its own synthesis, so no resampler follows it). One stream's packets, in order,
    from one thread at a time."""

    def __init__(self, rate: int) -> None:
        lib = library()
        error = ctypes.c_int(_OK)
        handle = lib.opus_decoder_create(rate, 1, ctypes.byref(error))
        if error.value != _OK or not handle:
            raise OpusError(error.value, f"create a decoder at {rate} Hz")
        self._lib = lib
        self._handle = ctypes.c_void_p(handle)
        weakref.finalize(self, lib.opus_decoder_destroy, self._handle)
        self.rate = rate
        self._step = round(rate * _STEP_S)
        self._max = round(rate * MAX_PACKET_S)
        self._pcm = (ctypes.c_int16 * self._max)()

    def decode(self, packet: bytes) -> bytes:
        """`packet`'s audio, s16le."""
        return self._run(packet, self._max, 0, "decode a packet")

    def conceal(self, samples: int, following: bytes | None = None) -> bytes:
        """`samples` of audio in place of lost packets (a multiple of 2.5 ms, at most
        `MAX_PACKET_S`), s16le. With `following` (the packet after the loss), its FEC recovers the
        last frame when it carries one, libopus's PLC the rest; without, all PLC."""
        if samples <= 0 or samples % self._step or samples > self._max:
            raise ValueError(f"samples: {samples} is not a multiple of {self._step} up to {self._max}")
        if following is None:
            return self._run(None, samples, 0, "conceal a loss")
        return self._run(following, samples, 1, "recover a loss")

    def _run(self, data: bytes | None, frame_size: int, fec: int, doing: str) -> bytes:
        count = self._lib.opus_decode(self._handle, data, 0 if data is None else len(data), self._pcm,
                                      frame_size, fec)
        if count < _OK:
            raise OpusError(count, doing)
        return ctypes.string_at(self._pcm, count * 2)
