"""ITU-T G.711 μ-law and A-law as numpy lookup tables (no dependency on the removed `audioop`).

The tables follow the reference algorithm of Sun's public-domain `g711.c`, which is what `audioop`,
SoX and most telephony stacks implement: decoding is a 256-entry table, encoding a 65,536-entry
table indexed by the int16 sample reinterpreted as uint16. Both are built once at import.
"""

from __future__ import annotations

import numpy as np

_SEG_SHIFT = 4
_QUANT_MASK = 0x0F
_ULAW_BIAS = 0x84
_ULAW_CLIP = 8159
_ULAW_SEG_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], np.int32)
_ALAW_SEG_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], np.int32)


def _ulaw_decode_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = ((u & _QUANT_MASK) << 3) + _ULAW_BIAS
    t <<= (u & 0x70) >> _SEG_SHIFT
    return np.where(u & 0x80, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def _alaw_decode_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    t = (a & _QUANT_MASK) << 4
    seg = (a & 0x70) >> _SEG_SHIFT
    t = np.where(seg == 0, t + 8, t + 0x108)
    t = np.where(seg > 1, t << np.maximum(seg - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


def _ulaw_encode_table() -> np.ndarray:
    pcm = np.arange(-32768, 32768, dtype=np.int32) >> 2  # 14-bit magnitude
    mask = np.where(pcm < 0, 0x7F, 0xFF)
    mag = np.minimum(np.abs(pcm), _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_ULAW_SEG_END, mag, side="left")
    code = (seg << 4) | ((mag >> np.minimum(seg + 1, 31)) & _QUANT_MASK)
    code = np.where(seg >= 8, 0x7F, code) ^ mask
    return _by_uint16(code)


def _alaw_encode_table() -> np.ndarray:
    pcm = np.arange(-32768, 32768, dtype=np.int32) >> 3  # 13-bit
    mask = np.where(pcm >= 0, 0xD5, 0x55)
    mag = np.where(pcm >= 0, pcm, -pcm - 1)
    seg = np.searchsorted(_ALAW_SEG_END, mag, side="left")
    shift = np.where(seg < 2, 1, seg)
    code = (seg << _SEG_SHIFT) | ((mag >> shift) & _QUANT_MASK)
    code = np.where(seg >= 8, 0x7F, code) ^ mask
    return _by_uint16(code)


def _by_uint16(codes_for_int16: np.ndarray) -> np.ndarray:
    """Reorder a table built over int16 -32768..32767 so it is indexed by the uint16 view."""
    table = np.empty(65536, np.uint8)
    table[np.arange(-32768, 32768, dtype=np.int32).astype(np.int16).view(np.uint16)] = (
        codes_for_int16.astype(np.uint8))
    return table


ULAW_DECODE = _ulaw_decode_table()
ALAW_DECODE = _alaw_decode_table()
ULAW_ENCODE = _ulaw_encode_table()
ALAW_ENCODE = _alaw_encode_table()


def decode(data: bytes, table: np.ndarray) -> np.ndarray:
    """G.711 bytes -> int16 samples through a decode table."""
    return table[np.frombuffer(data, np.uint8)]


def encode(samples: np.ndarray, table: np.ndarray) -> bytes:
    """int16 samples -> G.711 bytes through an encode table."""
    return table[samples.astype(np.int16, copy=False).view(np.uint16)].tobytes()
