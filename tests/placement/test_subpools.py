"""Sub-pools (pure): names and hash tags, a pod's stable sub-pool, the choice of two and the fallback order."""

from __future__ import annotations

import random
import zlib

import pytest

from liveplex.placement import (
    Busy,
    InvalidName,
    Member,
    Mode,
    Placed,
    PlacementClient,
    PodRecord,
    PoolLoad,
    Snapshot,
    Summary,
    pool_keys,
    subpools,
)
from liveplex.placement.keys import subpool
from liveplex.placement.subpools import Totals


def test_a_sub_pool_is_a_pool_of_its_own_with_its_own_tag() -> None:
    assert subpool("prod/pp", 3) == "prod/pp:3"
    assert pool_keys("prod/pp:3").members == "le:{prod/pp:3}:members"
    assert subpools.names("prod/pp", 1) == ["prod/pp"], "one sub-pool: the pool's own keys, as ever"
    assert subpools.names("prod/pp", 3) == ["prod/pp:0", "prod/pp:1", "prod/pp:2"]


@pytest.mark.parametrize("bad", ["prod/pp:", "prod/pp:01", "prod/pp:-1", "prod/pp:1:2", "prod/pp:x", "prod:1/pp"])
def test_malformed_sub_pool_names_are_refused(bad: str) -> None:
    with pytest.raises(InvalidName) as refused:
        pool_keys(bad)
    assert refused.value.param == "pool"


@pytest.mark.parametrize("count", [0, -1, 1025, True, 2.0])
def test_a_sub_pool_count_is_checked(count: object) -> None:
    with pytest.raises(InvalidName) as refused:
        subpools.names("prod/pp", count)  # type: ignore[arg-type]
    assert refused.value.param == "subpools"


def test_a_pod_belongs_to_one_sub_pool_by_a_stable_hash() -> None:
    pods = [f"pp-{i}" for i in range(3000)]
    where = [subpools.of("prod/pp", pod, 8) for pod in pods]
    assert where == [f"prod/pp:{zlib.crc32(p.encode()) % 8}" for p in pods], "CRC-32: the same in every process"
    sizes = [where.count(f"prod/pp:{k}") for k in range(8)]
    assert min(sizes) > 300 and max(sizes) < 450, sizes  # 375 each on average
    assert subpools.of("prod/pp", "pp-1", 1) == "prod/pp"


def test_totals_read_from_the_index_hash() -> None:
    assert Totals.of(["10", "3", "2"]) == Totals(10, 3, 2) and Totals(10, 3, 2).free == 5
    assert Totals.of([None, None, None]).free == 0, "an empty sub-pool has no room"
    assert Totals(4, 3, 2).free == 0, "leases on draining pods never make room negative"


def test_the_pair_is_two_different_sub_pools_that_are_up() -> None:
    rng = random.Random(7)
    pairs = [subpools.pair(5, rng, down={1, 3}) for _ in range(200)]
    assert all(a != b and {a, b} <= {0, 2, 4} for a, b in pairs)
    assert {frozenset(p) for p in pairs} == {frozenset(p) for p in [(0, 2), (0, 4), (2, 4)]}
    assert subpools.pair(5, rng, down={0, 1, 2, 3}) == (4, 4)
    assert subpools.pair(1, rng) == (0, 0)
    assert subpools.pair(2, rng, down={0, 1}) in {(0, 1), (1, 0)}, "none up: every one is a candidate again"


@pytest.mark.parametrize(("mode", "a", "b", "first"), [
    (Mode.SPREAD, Totals(10, 8, 0), Totals(10, 2, 1), 1),  # more of it free
    (Mode.SPREAD, Totals(100, 50, 0), Totals(10, 4, 0), 1),  # a fraction, not a count: 60 % beats 50 %
    (Mode.PACK, Totals(10, 8, 0), Totals(10, 2, 1), 0),  # the fuller one with room
    (Mode.PACK, Totals(10, 10, 0), Totals(10, 2, 0), 1),  # a full one last, whatever the mode
    (Mode.SPREAD, None, Totals(10, 10, 0), 1),  # unreadable after full
    (Mode.SPREAD, Totals(10, 5, 0), Totals(10, 5, 0), 0),  # a tie keeps the random pick's order
])
def test_the_better_of_two_goes_first_and_the_rest_follow(mode: Mode, a: Totals | None, b: Totals | None,
                                                          first: int) -> None:
    picked = (3, 1)
    tried = subpools.order(5, picked, [a, b], mode, random.Random(1), down={4})
    assert tried[:2] == [picked[first], picked[1 - first]]
    assert sorted(tried[2:]) == [0, 2], "then every other sub-pool that is up, once"


def test_busy_answers_merge_into_the_pools() -> None:
    merged = subpools.merge_busy([Busy(10, 10, False), Busy(0, 0, True)])
    assert merged == Busy(10, 10, no_engines=False)
    assert subpools.merge_busy([Busy(0, 0, True), Busy(0, 0, True)]).no_engines


async def test_place_among_falls_back_until_every_sub_pool_is_full(client: PlacementClient) -> None:
    """On one Redis (the tags only matter to a cluster): each sub-pool fills, then the pool is busy."""
    pods = {f"pp-{i}": subpools.of("prod/pp", f"pp-{i}", 3) for i in range(9)}
    for pod, sub in pods.items():
        await client.heartbeat(sub, pod, PodRecord("10.0.0.1:8000", 2, 0), ttl_ms=60_000)
    placed: dict[str, int] = {}
    for n in range(18):
        answer = await client.place_among("prod/pp", 3, f"s{n}")
        assert isinstance(answer, Placed) and pods[answer.pod] == answer.pool
        placed[answer.pod] = placed.get(answer.pod, 0) + 1
    assert placed == dict.fromkeys(pods, 2), "every slot used once, none twice"
    assert await client.place_among("prod/pp", 3, "one-more") == Busy(18, 0, no_engines=False)
    summary = await client.summary_among("prod/pp", 3)  # what the gateway's refresh and the operator read
    assert (summary.load.capacity, summary.load.reserved, summary.load.fresh) == (18, 18, 9)
    assert summary.candidates.members == (), "no candidate has room"


def test_a_route_carries_the_sub_pool_count_and_reads_back() -> None:
    assert subpools.route("prod/pp", 1) == "prod/pp", "one sub-pool: the plain name, as before sub-pools"
    assert subpools.route("prod/pp", 8) == "prod/pp*8"
    for value in ("prod/pp", "prod/pp*8"):
        assert subpools.route(*subpools.routed(value)) == value
    for bad, param in (("prod/pp*", "subpools"), ("prod/pp*x", "subpools"), ("prod/pp*0", "subpools"),
                       ("prod/pp*2000", "subpools"), ("pp*2", "pool")):
        with pytest.raises(InvalidName) as raised:
            subpools.routed(bad)
        assert raised.value.param == param, bad


def test_merged_summaries_sum_the_totals_and_keep_each_members_age() -> None:
    def part(now: int, pod: str, beat: int, active: int) -> Summary:
        load = PoolLoad(pods=1, fresh=1, draining=0, degraded=0, active=active, reserved=1, capacity=4,
                        worst_tick_p99_us=100 * active)
        return Summary(Snapshot(now, (Member(pod, PodRecord(f"{pod}:8000", 4, active), beat, 1),)), load)

    merged = subpools.merge_summaries([part(10_000, "a", 9_000, 1), part(12_000, "b", 11_500, 3)])
    assert merged.candidates.now_ms == 12_000
    assert [(m.pod, 12_000 - m.heartbeat_ms) for m in merged.candidates.members] == [("a", 1_000), ("b", 500)]
    assert merged.load == PoolLoad(pods=2, fresh=2, draining=0, degraded=0, active=4, reserved=2, capacity=8,
                                   worst_tick_p99_us=300)
    fresh = [m.pod for m in merged.candidates.fresh(stale_ms=600)]
    assert fresh == ["b"], "a's shard clock is behind: its age, not its score"
