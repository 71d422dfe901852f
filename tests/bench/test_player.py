"""The simulated player (live-contract §13.3, §14.27)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from liveplex.bench import player

RATE = 24_000


def _play(deltas: list[tuple[int, int]]) -> int:
    p = player.Player(RATE)
    for at_ns, samples in deltas:
        p.arrive(at_ns, samples)
    return p.stall_scaled


def test_first_audio_starts_playback_without_stall() -> None:
    p = player.Player(RATE)
    p.arrive(5_000_000_000, 1920)
    assert p.stall_ns == 0


def test_gap_after_running_dry_is_the_stall() -> None:
    p = player.Player(RATE)
    p.arrive(0, 1920)  # plays [0, 80 ms)
    p.arrive(100_000_000, 1920)  # 20 ms after running dry
    assert p.stall_ns == 20_000_000


def test_audio_arriving_before_running_dry_queues_without_stall() -> None:
    p = player.Player(RATE)
    p.arrive(0, 1920)
    p.arrive(30_000_000, 1920)  # queued behind the first frame: plays [80, 160 ms)
    p.arrive(160_000_000, 1920)  # exactly when it runs dry
    assert p.stall_ns == 0


def test_stall_is_exact_for_durations_that_are_not_whole_nanoseconds() -> None:
    p = player.Player(RATE)
    p.arrive(0, 1)  # 41 666.67 ns
    p.arrive(1_000_000, 1)
    assert p.stall_scaled == 1_000_000 * RATE - 1_000_000_000


@given(
    deltas=st.lists(
        st.tuples(st.integers(0, 200_000_000), st.integers(1, 4000), st.integers(1, 6)),
        min_size=1,
        max_size=30,
    ),
    cut_seed=st.randoms(use_true_random=False),
)
def test_splitting_a_delta_into_simultaneous_pieces_leaves_the_stall_unchanged(
    deltas: list[tuple[int, int, int]], cut_seed: object
) -> None:
    """§14.27: the same audio split into pieces arriving at the same instant stalls the same."""
    at = 0
    whole: list[tuple[int, int]] = []
    split: list[tuple[int, int]] = []
    for gap_ns, samples, pieces in deltas:
        at += gap_ns
        whole.append((at, samples))
        cuts = sorted(cut_seed.randint(0, samples) for _ in range(pieces - 1))  # type: ignore[attr-defined]
        bounds = [0, *cuts, samples]
        split += [(at, hi - lo) for lo, hi in itertools.pairwise(bounds)]
    assert _play(split) == _play(whole)
