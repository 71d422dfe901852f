"""`choose` and `PoolLoad.of` driven with literal snapshots: the placement rules of platform §6.4."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from liveplex.placement import STALE_MS, Busy, Member, Mode, Placed, PodRecord, PoolLoad, Snapshot, choose

NOW = 1_800_000_000_000


def pod(name: str, capacity: int, active: int = 0, reserved: int = 0, *, age_ms: int = 0,
        draining: bool = False, degraded: bool = False, tick_p99_us: int = 0) -> Member:
    record = PodRecord(f"{name}:8000", capacity, active, draining=draining, degraded=degraded,
                       tick_p99_us=tick_p99_us)
    return Member(name, record, heartbeat_ms=NOW - age_ms, reserved=reserved)


def pool(*members: Member) -> Snapshot:
    return Snapshot(NOW, members)


def test_spread_picks_the_pod_with_most_free_slots() -> None:
    assert choose(pool(pod("a", 4, 2), pod("b", 4, 0), pod("c", 4, 1))) == Placed("b", "b:8000")


def test_pack_picks_the_pod_with_fewest_free_slots_that_still_has_room() -> None:
    snapshot = pool(pod("a", 4, 2), pod("b", 4, 0), pod("c", 4, 3), pod("d", 4, 4))
    assert choose(snapshot, mode=Mode.PACK) == Placed("c", "c:8000")


def test_reservations_count_against_free_slots() -> None:
    assert choose(pool(pod("a", 4, 0, reserved=3), pod("b", 4, 2))) == Placed("b", "b:8000")
    assert choose(pool(pod("a", 2, 1, reserved=1))) == Busy(2, 1, no_engines=False)


def test_draining_excluded_and_stale_pods_are_skipped() -> None:
    snapshot = pool(pod("a", 8, draining=True), pod("b", 8), pod("c", 8, age_ms=STALE_MS + 1), pod("d", 1))
    assert choose(snapshot, exclude={"b"}) == Placed("d", "d:8000")


def test_a_pod_exactly_at_the_stale_window_is_still_fresh() -> None:
    assert choose(pool(pod("a", 1, age_ms=STALE_MS))) == Placed("a", "a:8000")


def test_degraded_pods_rank_after_every_healthy_pod_with_room() -> None:
    snapshot = pool(pod("a", 8, degraded=True), pod("b", 8, 7))
    assert choose(snapshot) == Placed("b", "b:8000")
    assert choose(snapshot, mode=Mode.PACK) == Placed("b", "b:8000")
    assert choose(pool(pod("a", 8, degraded=True), pod("b", 8, 8))) == Placed("a", "a:8000")


def test_the_tiebreak_picks_among_equals_in_member_order() -> None:
    snapshot = pool(pod("a", 4), pod("b", 2), pod("c", 4), pod("d", 4))
    assert [choose(snapshot, tiebreak=t).pod for t in range(4)] == ["a", "c", "d", "a"]


def test_busy_totals_cover_the_considered_pods() -> None:
    snapshot = pool(pod("a", 4, 4), pod("b", 2, 1, reserved=1), pod("c", 8, 1, draining=True), pod("d", 6, 0))
    assert choose(snapshot, exclude={"d"}) == Busy(total_capacity=6, total_active=5, no_engines=False)


def test_no_fresh_pod_that_takes_sessions_is_no_engines() -> None:
    assert choose(pool()) == Busy(0, 0, no_engines=True)
    assert choose(pool(pod("a", 4, draining=True), pod("b", 4, age_ms=STALE_MS + 1))) == Busy(0, 0, no_engines=True)


def test_an_excluded_pod_still_counts_as_an_engine() -> None:
    assert choose(pool(pod("a", 4)), exclude=["a"]) == Busy(0, 0, no_engines=False)


MEMBERS = st.lists(
    st.builds(pod, name=st.sampled_from("abcdefgh"), capacity=st.integers(0, 6), active=st.integers(0, 7),
              reserved=st.integers(0, 4), age_ms=st.sampled_from([0, 100, STALE_MS + 1]),
              draining=st.booleans(), degraded=st.booleans()),
    max_size=8, unique_by=lambda m: m.pod,
)


@given(MEMBERS, st.sampled_from(list(Mode)), st.integers(0, 2**31 - 1), st.sets(st.sampled_from("abcdefgh")))
def test_a_placed_pod_is_fresh_not_draining_not_excluded_and_has_room(
    members: list[Member], mode: Mode, tiebreak: int, exclude: set[str]
) -> None:
    snapshot = pool(*members)
    result = choose(snapshot, exclude, mode, tiebreak)
    eligible = [m for m in snapshot.fresh() if not m.record.draining and m.pod not in exclude
                and m.record.capacity - m.record.active - m.reserved > 0]
    if not eligible:
        assert isinstance(result, Busy)
        return
    assert isinstance(result, Placed)
    chosen = next(m for m in members if m.pod == result.pod)
    assert chosen in eligible
    if chosen.record.degraded:
        assert all(m.record.degraded for m in eligible)


def test_pool_load_sums_sessions_on_fresh_pods_and_capacity_where_placement_may_go() -> None:
    snapshot = pool(pod("a", 4, 2, reserved=1, tick_p99_us=9000), pod("b", 8, 3, draining=True, tick_p99_us=12000),
                    pod("c", 4, 4, degraded=True), pod("d", 16, 9, reserved=2, age_ms=STALE_MS + 1,
                                                       tick_p99_us=99000))
    load = PoolLoad.of(snapshot)
    assert load == PoolLoad(pods=4, fresh=3, draining=1, degraded=1, active=9, reserved=1, capacity=8,
                            worst_tick_p99_us=12000)
    assert load.occupied == 10


def test_an_empty_pool_has_zero_load() -> None:
    assert PoolLoad.of(pool()) == PoolLoad(0, 0, 0, 0, 0, 0, 0, 0)
