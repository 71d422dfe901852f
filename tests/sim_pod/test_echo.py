"""The echo core: live-contract §14 items 24-25."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from liveplex.sim_pod import WORDS, Echo, SimProfile
from liveplex.sim_pod.echo import LOUD_MEAN_SQUARE, loud_rows

FRAME = 16


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 8), st.integers(1, 7), st.lists(st.booleans(), max_size=80))
def test_output_is_the_input_late_and_words_fall_on_loud_beats(
        echo_frames: int, word_frames: int, loudness: list[bool]) -> None:
    echo = Echo(FRAME, echo_frames, word_frames)
    rng = np.random.default_rng(len(loudness))
    heard = [rng.integers(-32768, 32768, FRAME).astype("<i2").tobytes() for _ in loudness]
    outs, words, loud_seen = [], [], 0
    for i, frame in enumerate(heard):
        out, word = echo.step(frame, loudness[i])
        outs.append(out)
        if loudness[i]:
            loud_seen += 1
        expect_word = loudness[i] and loud_seen % word_frames == 0
        assert (word is not None) == expect_word
        if word is not None:
            words.append(word)
    for i, out in enumerate(outs):
        expected = heard[i - echo_frames] if i >= echo_frames else bytes(2 * FRAME)
        assert out == expected
    cycled = list(itertools.islice(itertools.cycle(WORDS), len(words)))
    assert "".join(words) == " ".join(cycled)


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.int16, st.tuples(st.integers(0, 6), st.integers(1, 64))))
def test_loud_rows_is_the_mean_square_of_each_row_against_the_threshold(frames: np.ndarray) -> None:
    got = loud_rows(frames)
    assert got.shape == (frames.shape[0],)
    mean_square = (frames.astype(np.float64) / 32768.0) ** 2
    for row, loud in zip(mean_square.mean(axis=1), got, strict=True):
        if abs(row - LOUD_MEAN_SQUARE) > 1e-6:  # float32 sums may round either way at the edge
            assert loud == (row > LOUD_MEAN_SQUARE)


def test_a_quiet_row_next_to_a_loud_one_stays_quiet() -> None:
    quiet = np.full(1920, 300, np.int16)  # RMS 300/32768 ≈ 0.009: just below -40 dBFS
    loud = np.full(1920, 360, np.int16)  # ≈ 0.011: just above
    assert loud_rows(np.stack([quiet, loud, quiet])).tolist() == [False, True, False]


def test_cost_curve() -> None:
    assert SimProfile(tick_base_us=500, tick_per_session_us=100).cost_us(3) == 800


@pytest.mark.parametrize(("field", "value"), [
    ("max_sessions", 0), ("prebuffer_frames", 5), ("prebuffer_frames", -1), ("tick_groups", 3), ("echo_frames", -1),
    ("tick_base_us", -1), ("jitter_frames", 0),
])
def test_bad_settings_name_the_field(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        SimProfile(**{field: value})


def test_info_has_the_contract_defaults() -> None:
    info = SimProfile().info()
    assert (info.max_frames, info.max_sessions, info.default_voice) == (3000, 64, "NATF2")
    assert len(info.voices) == 18 and list(info.voices) == sorted(info.voices)


def test_commentary_is_said_a_word_a_frame_before_any_echo_word() -> None:
    echo = Echo(FRAME, 0, 1)
    loud = bytes(2 * FRAME)
    echo.say("Welcome  back,\nAda!")
    said = [echo.step(loud, True)[1] for _ in range(5)]
    assert said == ["Welcome", " back,", " Ada!", " loud", " and"]  # "I hear you" fell during it
    echo.say("x " * 2000)
    assert sum(echo.step(loud, False)[1] is not None for _ in range(1100)) == 1000  # the backlog is bounded
