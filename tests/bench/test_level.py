"""Pooling a level: clean, error histogram, server deltas (live-contract §13.5)."""

from __future__ import annotations

import array

from liveplex.bench import caller, level


def _result(ok: bool = True, underrun_ms: float = 0.0, late_us: tuple[int, ...] = (0,),
            error: str | None = None, send_late_us: tuple[int, ...] = (100,)) -> caller.CallResult:
    return caller.CallResult(
        ok=ok, error=error, started_ms=2.0, close_reason="close_requested" if ok else None,
        frames=len(late_us), audio_s=0.08 * len(late_us), underrun_ms=underrun_ms,
        lateness_us=array.array("q", late_us), send_late_us=array.array("q", send_late_us),
    )


def test_all_ok_and_no_stall_is_clean() -> None:
    verdict = level.judge("pod", [_result(), _result(underrun_ms=1.0)], None, None, None, None)
    assert verdict.clean and verdict.ok == 2 and verdict.underrun_sessions == 0


def test_one_stall_over_a_millisecond_is_not_clean() -> None:
    verdict = level.judge("pod", [_result(), _result(underrun_ms=1.5)], None, None, None, None)
    assert not verdict.clean and verdict.underrun_sessions == 1


def test_a_failed_session_is_not_clean_and_is_counted_by_error() -> None:
    failed = [_result(ok=False, error="server error: " + "x" * 200) for _ in range(2)]
    verdict = level.judge("pod", [_result(), *failed], None, None, None, None)
    assert not verdict.clean
    assert verdict.failed == 2
    assert verdict.errors == {("server error: " + "x" * 200)[:80]: 2}


def test_lateness_is_pooled_over_every_frame_of_every_session() -> None:
    sessions = [_result(late_us=(0,) * 99), _result(late_us=(50_000,))]
    verdict = level.judge("pod", sessions, None, None, None, None)
    assert verdict.late_ms.p99 == 0.0 and verdict.late_ms.max == 50.0
    assert verdict.frames == 100


def test_a_lateness_bound_makes_a_late_level_unclean() -> None:
    sessions = [_result(late_us=(20_000,) * 10)]
    assert level.judge("pod", sessions, 25.0, None, None, None).clean
    assert not level.judge("pod", sessions, 10.0, None, None, None).clean


def test_lateness_exactly_at_the_bound_is_clean() -> None:
    sessions = [_result(late_us=(20_000,) * 10)]
    assert level.judge("pod", sessions, 20.0, None, None, None).clean
    assert not level.judge("pod", sessions, 19.999, None, None, None).clean


def test_a_client_sending_late_over_5_ms_at_p99_limits_the_level() -> None:
    def limited(send_late_us: int) -> bool:
        return level.judge("pod", [_result(send_late_us=(send_late_us,) * 100)], None, None, None,
                           None).client_limited

    assert not limited(100) and not limited(5_000)  # at the limit: still the server's result
    assert limited(5_001)
    # p99 of 100 sends is the 99th: one late send in a hundred does not limit the level
    assert not level.judge("pod", [_result(send_late_us=(100,) * 99 + (50_000,))], None, None, None,
                           None).client_limited


def test_cpu_per_frame_pair_divides_cpu_by_frames() -> None:
    verdict = level.judge("pod", [_result(late_us=(0,) * 4000)], None, None, None, 0.2)
    assert verdict.cpu_us_per_frame == 50.0


def test_server_stats_are_differenced_over_the_level() -> None:
    before = {"sessions": 3, "max_sessions": 64, "ticks": 100, "tick_busy_us": 5000, "late_ticks": 1, "underruns": 2}
    after = {"sessions": 0, "max_sessions": 64, "ticks": 160, "tick_busy_us": 9000, "late_ticks": 4, "underruns": 7}
    assert level.stats_delta(before, after) == {
        "ticks": 60, "tick_busy_us": 4000, "late_ticks": 3, "underruns": 5, "max_sessions": 64}
    assert level.stats_delta(None, after) == {}


def test_largest_clean_stops_at_the_first_unclean_level() -> None:
    def at(n: int, clean: bool) -> level.Level:
        verdict = level.judge("pod", [_result()] * n if clean else [_result(underrun_ms=9)] * n,
                              None, None, None, None)
        assert verdict.clean is clean
        return verdict

    assert level.largest_clean([at(2, True), at(4, True), at(6, False), at(8, True)]) == 4
    assert level.largest_clean([at(2, False)]) is None


def test_echo_round_trips_are_pooled_and_measured_against_the_floor() -> None:
    sessions = [_result(), _result()]
    sessions[0].echo_rtt_us = array.array("q", [600_000] * 3)
    sessions[1].echo_rtt_us = array.array("q", [700_000])
    verdict = level.judge("pod", sessions, None, None, None, None, 560.0)
    assert (verdict.echo_rtt_ms.count, verdict.echo_rtt_ms.p50, verdict.echo_rtt_ms.p99) == (4, 600.0, 700.0)
    assert verdict.echo_above_floor_ms == {"p50": 40.0, "p99": 140.0}
    assert verdict.as_dict()["echo_rtt_ms"]["count"] == 4
    assert level.judge("pod", sessions, None, None, None, None).echo_above_floor_ms is None  # no floor
    assert level.judge("pod", [_result()], None, None, None, None, 560.0).echo_above_floor_ms is None  # no echo


def test_the_pods_wait_and_lateness_histograms_are_differenced_as_sum_and_count() -> None:
    """Issue 31's measured budget: the `/live/stats` histograms' `sum_s` and counts over the level;
    issue 44's targets: their p50 and p99 over the level alone (a bucket's upper bound), not since start."""
    before = {"ticks": 10, "caller_wait": {"bounds_s": [0.01, 0.04], "counts": [200, 0, 1], "sum_s": 0.03},
              "tick_lateness": {"bounds_s": [0.01], "counts": [10, 0], "sum_s": 0.005}}
    after = {"ticks": 20, "caller_wait": {"bounds_s": [0.01, 0.04], "counts": [201, 99, 1], "sum_s": 2.5},
             "tick_lateness": {"bounds_s": [0.01], "counts": [20, 0], "sum_s": 0.01}}
    assert level.stats_delta(before, after) == {
        "ticks": 10, "caller_wait_us": 2_470_000, "caller_wait_n": 100, "caller_wait_p50_us": 40_000,
        "caller_wait_p99_us": 40_000, "tick_lateness_us": 5_000, "tick_lateness_n": 10,
        "tick_lateness_p50_us": 10_000, "tick_lateness_p99_us": 10_000}
