"""libopus through ctypes (`webrtc.opus`): real Opus packets, encoded with in-band FEC as Chrome
sends them, decoded with packets lost; the concealed audio against the lossless decode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from liveplex.bench import tone
from liveplex.gptlive.server.webrtc import opus
from liveplex.live import frames
from tests.support import webrtc

RATE = frames.SAMPLE_RATE
PACKET = RATE // 50
"""20 ms at the decoder's 24 kHz."""


PACKETS = tone.opus_packets(tone.voice())
has_fec = webrtc.has_fec


def decoded(lost: set[int], fec: bool = True) -> np.ndarray:
    """`PACKETS` through one decoder, `lost` left out and concealed when the next arrives."""
    decoder = opus.Decoder(RATE)
    out = bytearray()
    for n, packet in enumerate(PACKETS):
        if n in lost:
            continue
        missing = 0
        while n - 1 - missing in lost:
            missing += 1
        if missing:
            out += decoder.conceal(missing * PACKET, packet if fec else None)
        out += decoder.decode(packet)
    return np.frombuffer(bytes(out), np.int16).astype(np.float64)


LOSSLESS = decoded(set())


def error(got: np.ndarray, first: int, stop: int) -> float:
    """RMS error against the lossless decode over packets first..stop-1, relative to its RMS."""
    want = LOSSLESS[first * PACKET:stop * PACKET]
    diff = got[first * PACKET:stop * PACKET] - want
    return float(np.sqrt((diff ** 2).mean() / (want ** 2).mean()))


def loudness(got: np.ndarray, first: int, stop: int) -> float:
    """RMS over packets first..stop-1 relative to the lossless decode's."""
    want = LOSSLESS[first * PACKET:stop * PACKET]
    return float(np.sqrt((got[first * PACKET:stop * PACKET] ** 2).mean() / (want ** 2).mean()))


def test_the_encoder_puts_fec_in_its_packets_as_chrome_does() -> None:
    assert len(LOSSLESS) == len(PACKETS) * PACKET  # 20 ms each, at 24 kHz: no resampler after it
    assert sum(map(has_fec, PACKETS)) > len(PACKETS) // 4  # SILK's LBRR, for the frames it finds voiced


def test_a_lost_packet_is_recovered_from_the_next_packets_fec() -> None:
    lost = next(n for n in range(20, len(PACKETS) - 1) if has_fec(PACKETS[n + 1]))
    recovered, concealed = decoded({lost}), decoded({lost}, fec=False)
    assert len(recovered) == len(LOSSLESS) and len(concealed) == len(LOSSLESS)
    assert error(recovered, lost, lost + 1) < 0.1  # what was said, not a guess
    assert error(concealed, lost, lost + 1) > 2 * error(recovered, lost, lost + 1)
    assert error(recovered, lost + 1, lost + 3) < 0.1  # and the decoder is where it should be after


def test_a_lost_packet_without_fec_is_concealed_not_silent() -> None:
    concealed = decoded({30}, fec=False)
    assert len(concealed) == len(LOSSLESS)
    assert loudness(concealed, 30, 31) > 0.4 and error(concealed, 30, 31) < 0.7  # silence: 1.0, 0.0
    assert np.corrcoef(concealed[30 * PACKET:31 * PACKET], LOSSLESS[30 * PACKET:31 * PACKET])[0, 1] > 0.8


def test_several_lost_packets_keep_their_time_and_the_last_comes_back_from_fec() -> None:
    last = next(n for n in range(40, len(PACKETS) - 1) if has_fec(PACKETS[n + 1]))
    lost = {last - 2, last - 1, last}
    got = decoded(lost)
    assert len(got) == len(LOSSLESS)
    assert loudness(got, last - 2, last + 1) > 0.25  # PLC fades, but the gap is not silence
    assert error(got, last, last + 1) < 0.85 * error(decoded(lost, fec=False), last, last + 1)
    assert error(got, last + 4, last + 8) < 0.3  # back on the caller's signal (the decoder's state converges)


def test_concealment_is_whole_steps_of_2_5_ms_up_to_the_longest_packet() -> None:
    decoder = opus.Decoder(RATE)
    assert len(decoder.conceal(60)) == 120  # 2.5 ms, before any packet: silence, but its length
    for samples in (0, 61, int(RATE * opus.MAX_PACKET_S) + 60):
        with pytest.raises(ValueError, match="samples"):
            decoder.conceal(samples)


def test_what_is_not_opus_is_refused_by_name() -> None:
    assert opus.packet_ticks(PACKETS[0]) == 960
    for junk in (b"", bytes([0x03])):  # nothing; a code-3 packet without its frame count
        with pytest.raises(opus.OpusError, match="duration"):
            opus.packet_ticks(junk)
    with pytest.raises(opus.OpusError, match="decode a packet"):
        opus.Decoder(RATE).decode(bytes([0x03]))


def test_a_pyav_without_libopus_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(opus, "_library_dirs", lambda: [tmp_path])
    opus.library.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=f"libopus not found beside PyAV.*{tmp_path}"):
            opus.Decoder(RATE)
    finally:
        monkeypatch.undo()
        opus.library.cache_clear()
