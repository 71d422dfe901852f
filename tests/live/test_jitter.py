"""The jitter buffer: live-contract §5.4 worked examples and §14 properties 1-7."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.live.jitter import Jitter, s16le


def pcm(*samples: int) -> bytes:
    return np.array(samples, "<i2").tobytes()


def test_underrun_is_silence_and_keeps_the_partial_frame() -> None:
    j = Jitter(frame=4, prebuffer=1, max_frames=2)
    j.push(pcm(0, 0, 0, 0, 16384, 16384, 16384))
    assert j.pop().tolist() == [0, 0, 0, 0]
    assert j.pop().tolist() == [0, 0, 0, 0]
    assert j.underruns == 1
    assert len(j) == 3
    j.push(pcm(-32768))
    assert j.pop().tolist() == [0.5, 0.5, 0.5, -1.0]


def test_playout_waits_for_the_prebuffer_and_refills_after_running_dry() -> None:
    j = Jitter(frame=2, prebuffer=2, max_frames=4)
    j.push(pcm(1, 1))
    assert not j.pop().any() and j.underruns == 0
    j.push(pcm(2, 2))
    assert j.pop().any()
    assert j.pop().any()
    assert not j.pop().any() and j.underruns == 1
    j.push(pcm(3, 3))
    assert not j.pop().any() and j.underruns == 1
    j.push(pcm(4, 4))
    assert (j.pop() * 32768).tolist() == [3, 3]


def test_late_audio_drops_the_oldest() -> None:
    j = Jitter(frame=2, prebuffer=1, max_frames=2)
    j.push(pcm(1, 2, 3, 4, 5, 6))
    assert j.dropped == 2
    assert (j.pop() * 32768).tolist() == [3, 4]


@pytest.mark.parametrize(("frame", "prebuffer", "max_frames", "word"), [
    (0, 1, 1, "frame"), (2, 0, 1, "prebuffer"), (2, 3, 2, "prebuffer"),
])
def test_constructor_rejects_bad_shapes(frame: int, prebuffer: int, max_frames: int, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        Jitter(frame, prebuffer, max_frames)


# An operation: push some bytes, pop, or skip some frames.
ops = st.lists(st.one_of(
    st.tuples(st.just("push"), st.binary(min_size=0, max_size=40)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("skip"), st.integers(0, 3)),
), max_size=60)
shapes = st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(0, 3)).map(
    lambda t: (t[0], t[1], t[1] + t[2]))


@settings(max_examples=300, deadline=None)
@given(shapes, ops)
def test_every_invariant_holds_over_any_sequence(shape: tuple[int, int, int], seq: list) -> None:
    frame, prebuffer, max_frames = shape
    j = Jitter(frame, prebuffer, max_frames)
    pushed = popped = skipped = 0
    for op, arg in seq:
        if op == "push":
            j.push(arg)
            pushed += len(arg)
            assert len(j) <= frame * max_frames  # property 2: bounded
        elif op == "pop":
            before, playing, under = len(j), j.playing, j.underruns
            out = j.pop()
            plays = (playing or before >= frame * prebuffer) and before >= frame
            assert len(j) == (before - frame if plays else before)  # property 4
            if not plays:
                assert not out.any()
                # property 5: an underrun is counted once per dry spell
                assert j.underruns == under + (1 if playing else 0)
            popped += frame if plays else 0
        else:
            before, playing, under = len(j), j.playing, j.underruns
            j.skip(arg)
            assert len(j) == before - min(before, arg * frame)  # property 3
            assert (j.playing, j.underruns) == (playing, under)
            skipped += min(before, arg * frame)
    # property 1: conservation of samples
    assert pushed == 2 * (popped + skipped + j.dropped + len(j)) + len(j.odd)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=200), st.lists(st.integers(0, 200), max_size=8))
def test_byte_splits_never_matter_and_played_audio_is_the_pushed_audio(
        data: bytes, cuts: list[int]) -> None:
    frame = 3

    def frames_for(chunks: list[bytes]) -> list[bytes]:
        # cap large enough that nothing is dropped; pop after each push
        j = Jitter(frame, 1, 1000)
        out = []
        for c in chunks:
            j.push(c)
            while len(j) >= frame:
                out.append(s16le(j.pop()))
        return out

    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    whole = frames_for([data])
    assert frames_for(pieces) == whole  # property 7
    played = b"".join(whole)  # property 6: no drops, no skips -> lossless
    assert played == data[: len(played)]
    assert len(data) - len(played) < 2 * frame + 1


@settings(max_examples=200, deadline=None)
@given(shapes, ops)
def test_pop_pcm_is_pop_as_s16le_with_the_same_counters(shape: tuple[int, int, int], seq: list) -> None:
    frame, prebuffer, max_frames = shape
    floats, pcm = Jitter(frame, prebuffer, max_frames), Jitter(frame, prebuffer, max_frames)
    for op, arg in seq:
        for j in (floats, pcm):
            if op == "push":
                j.push(arg)
            elif op == "skip":
                j.skip(arg)
        if op == "pop":
            assert pcm.pop_pcm() == s16le(floats.pop())
        state = [(len(j), j.playing, j.underruns, j.dropped, j.odd) for j in (floats, pcm)]
        assert state[0] == state[1]
