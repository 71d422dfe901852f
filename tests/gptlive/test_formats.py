"""Edge transcoding: G.711 tables, the streaming resampler, per-session Inbound/Outbound."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.gptlive import formats, g711
from liveplex.gptlive.events import AudioFormat
from liveplex.gptlive.resample import Resampler
from liveplex.live import frames

with warnings.catch_warnings():  # the deprecated stdlib module is only the test oracle
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)
CODES = bytes(range(256))
FORMATS = [AudioFormat("audio/pcm", 24000), AudioFormat("audio/pcm", 16000),
           AudioFormat("audio/pcmu", 8000), AudioFormat("audio/pcma", 8000)]


@pytest.mark.parametrize(("encode", "decode", "lin2", "to_lin"), [
    (g711.ULAW_ENCODE, g711.ULAW_DECODE, audioop.lin2ulaw, audioop.ulaw2lin),
    (g711.ALAW_ENCODE, g711.ALAW_DECODE, audioop.lin2alaw, audioop.alaw2lin),
])
def test_g711_tables_match_the_reference_codec_exactly(encode, decode, lin2, to_lin) -> None:
    assert g711.encode(ALL_INT16, encode) == lin2(ALL_INT16.tobytes(), 2)
    assert g711.decode(CODES, decode).tobytes() == to_lin(CODES, 2)


def test_g711_silence_is_not_a_zero_byte_but_decodes_to_near_zero() -> None:
    zero = np.zeros(1, np.int16)
    assert g711.encode(zero, g711.ULAW_ENCODE) == b"\xff"
    assert g711.encode(zero, g711.ALAW_ENCODE) == b"\xd5"
    assert abs(int(g711.decode(b"\xd5", g711.ALAW_DECODE)[0])) <= 8


@pytest.mark.parametrize(("rate_in", "rate_out"), [(8000, 24000), (16000, 24000), (24000, 8000),
                                                   (24000, 16000)])
def test_resampler_output_is_exactly_proportional_per_block(rate_in: int, rate_out: int) -> None:
    r = Resampler(rate_in, rate_out)
    block = rate_in // 100
    assert len(r.feed(np.zeros(block - 1, np.int16))) == 0  # an incomplete block waits
    assert len(r.feed(np.zeros(1, np.int16))) == rate_out // 100
    assert len(r.feed(np.zeros(block * 8, np.int16))) == rate_out * 8 // 100


@pytest.mark.parametrize(("rate_in", "rate_out"), [(8000, 24000), (16000, 24000), (24000, 8000),
                                                   (24000, 16000)])
def test_resampler_keeps_a_tone_in_band(rate_in: int, rate_out: int) -> None:
    t = np.arange(rate_in) / rate_in
    y = Resampler(rate_in, rate_out).feed((10000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16))
    spectrum = np.abs(np.fft.rfft(y[rate_out // 10:].astype(float)))
    peak_hz = np.argmax(spectrum) * rate_out / len(y[rate_out // 10:])
    assert abs(peak_hz - 440) < 3
    assert 9000 < np.abs(y[rate_out // 10:]).max() < 11000


def test_resampler_removes_what_the_lower_rate_cannot_carry() -> None:
    t = np.arange(24000) / 24000
    y = Resampler(24000, 8000).feed((10000 * np.sin(2 * np.pi * 6000 * t)).astype(np.int16))
    assert np.abs(y[800:]).max() < 100  # a 6 kHz tone would alias to 2 kHz


@pytest.mark.parametrize(("rate_in", "rate_out"), [(8000, 24000), (16000, 24000), (24000, 8000),
                                                   (24000, 16000)])
@pytest.mark.parametrize("level", [1000, -1000, 12345, -12345])
def test_resampler_passes_a_constant_exactly(rate_in: int, rate_out: int, level: int) -> None:
    # unity gain at DC, rounded to nearest: each branch's Q20 gain is within 26 parts in 2^20 of
    # one, far below half an LSB at these levels, so any bias in the rounding shows
    y = Resampler(rate_in, rate_out).feed(np.full(rate_in // 100 * 3, level, np.int16))
    assert (y[rate_out // 100:] == level).all()  # past the first block: the filter is full


@pytest.mark.parametrize(("rates", "click"), [
    ((24000, 8000), {}),  # every tap of the gain-1 decimator is below half an LSB
    ((8000, 24000), {46: 1, 47: 1, 48: 1, 49: 1}),
    ((24000, 16000), {16: 1}),
    ((16000, 24000), {23: 1, 24: 1}),
])
def test_resampler_output_of_a_one_lsb_click_is_pinned(rates: tuple[int, int], click: dict[int, int]) -> None:
    for sign in (1, -1):
        x = np.zeros(rates[0] // 100 * 2, np.int16)
        x[0] = sign
        y = Resampler(*rates).feed(x)
        assert {i: int(v) for i, v in enumerate(y) if v} == {i: sign * v for i, v in click.items()}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(8000, 24000), (16000, 24000), (24000, 8000), (24000, 16000)]),
       st.lists(st.integers(1, 700), min_size=1, max_size=12), st.integers(0, 2**32 - 1))
def test_resampler_output_does_not_depend_on_the_split(rates: tuple[int, int], cuts: list[int],
                                                       seed: int) -> None:
    x = np.random.default_rng(seed).integers(-32768, 32768, sum(cuts), dtype=np.int16)
    whole = Resampler(*rates).feed(x)
    r, parts, i = Resampler(*rates), [], 0
    for n in cuts:
        parts.append(r.feed(x[i:i + n]))
        i += n
    assert np.array_equal(np.concatenate(parts), whole)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(FORMATS), st.lists(st.integers(1, 500), min_size=1, max_size=10),
       st.integers(0, 2**32 - 1))
def test_inbound_does_not_depend_on_how_the_network_split_the_audio(
        fmt: AudioFormat, cuts: list[int], seed: int) -> None:
    width = formats.codec(fmt).sample_bytes
    data = np.random.default_rng(seed).integers(0, 256, sum(cuts) * width, dtype=np.uint8).tobytes()
    whole = formats.Inbound(fmt).convert(data, muted=False)
    inbound, out, i = formats.Inbound(fmt), b"", 0
    for n in cuts:
        out += inbound.convert(data[i:i + n * width], muted=False)
        i += n * width
    assert out == whole


@pytest.mark.parametrize("fmt", FORMATS)
def test_outbound_emits_exactly_one_frame_in_the_format_per_engine_frame(fmt: AudioFormat) -> None:
    out = formats.Outbound(fmt)
    expected = {16000: 2560, 24000: 3840, 8000: 640}[fmt.rate]
    rng = np.random.default_rng(1)
    for _ in range(5):
        pcm = rng.integers(-2000, 2000, frames.FRAME_SAMPLES, dtype=np.int16).tobytes()
        assert len(out.convert(pcm)) == expected == formats.codec(fmt).frame_bytes()


def test_native_format_passes_through_untouched() -> None:
    data = bytes(range(256)) * 4
    assert formats.Inbound(FORMATS[0]).convert(data, muted=False) is data
    assert formats.Outbound(FORMATS[0]).convert(data) is data


@pytest.mark.parametrize("fmt", FORMATS)
def test_muted_audio_is_silence_of_the_same_decoded_length(fmt: AudioFormat) -> None:
    width = formats.codec(fmt).sample_bytes
    loud = (np.full(fmt.rate // 10, 20000, np.int16).tobytes() if width == 2
            else b"\x10" * (fmt.rate // 10))
    heard = formats.Inbound(fmt).convert(loud, muted=True)
    assert heard == bytes(frames.SAMPLE_RATE // 10 * 2)


def test_outbound_refuses_a_partial_engine_frame_when_transcoding() -> None:
    with pytest.raises(ValueError):
        formats.Outbound(FORMATS[1]).convert(bytes(100))


def test_chunk_cap_is_30_s_in_the_session_format() -> None:
    assert [formats.codec(f).max_chunk_bytes() for f in FORMATS] == [1_440_000, 960_000,
                                                                     240_000, 240_000]
